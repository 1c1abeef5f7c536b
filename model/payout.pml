/*
 * Money that leaves: the recovery-point flow of a payout (the payouts
 * design, built against it: see the list of Go functions below). NCLIENT
 * requests with the same key, a completer, a provider (a bank) that
 * deduplicates by idempotency key and may fail before executing, execute
 * and not answer, or answer late, and an abstract clock. docs/model.md says
 * what is modelled and what is abstracted.
 *
 * The flow. A payout holds its key as a leased request does (a fenced
 * claim; every phase commits fenced by the hold's token). Phase A commits
 * the debit with the recovery point UNKNOWN ("outcome unknown") before the
 * provider is called with a key derived from the request's key. Phase B
 * commits the outcome with the key's completion: PAID, or FAILED with the
 * refund. When the provider does not answer, the key is freed with
 * the recovery point left UNKNOWN (the client gets 202 pending). A retry,
 * or the completer, that finds UNKNOWN asks the provider by the derived key
 * and, when the provider knows no transfer of that key, sends it again with
 * the same derived key (the provider deduplicates); it never treats
 * UNKNOWN as "never happened".
 *
 *   LIVENESS                      adds the LTL properties (pan -a -f).
 *   BROKEN_FRESH_KEY              the completer sends again with a fresh
 *                                 provider key instead of the derived one.
 *   BROKEN_REFUND_ON_NOT_FOUND    a provider that knows no transfer of the
 *                                 derived key is taken to mean "never
 *                                 happened": the payout is refunded.
 *   BROKEN_SWEEP_UNKNOWN          the sweeper deletes a record past
 *                                 retention whose recovery point is UNKNOWN.
 *   BROKEN_UNFENCED_READ          an attempt reads the recovery point with
 *                                 a plain read after taking the key, not
 *                                 with a read fenced by its token.
 *   BROKEN_KEY_PER_KEY            the provider key is derived from the
 *                                 request's key alone, the same in every
 *                                 life of the record (a key reused after
 *                                 retention).
 *   BROKEN_COMPLETER_CLAIMS       the completer takes the key over as a
 *                                 client claims it, by the record's token
 *                                 of the moment, not the one it listed
 *                                 the record with: a fresh claim, or any
 *                                 re-acquirable record.
 *
 * The code that must agree with this model (the library part; paymentsd's
 * payout handler, payments/api's payouts, follows the Client's steps):
 *
 *   Client "held:" fenced read    idem.RecoveryPoint, idem.ProviderKey (phase.go),
 *                                 through store.Keys.Progress (pgstore and
 *                                 sqlitestore: pgsql.SelectPhase, selectPhase)
 *   DERIVED (the derived key)     idem.ProviderKey: HMAC-SHA256 of the
 *                                 user, the key and the life (deriveKey),
 *                                 recorded with phase A (provider_keys)
 *                                 and read back by the fenced read, so it
 *                                 is a function of the life whatever the
 *                                 secret is by then
 *   phase A                       idem.Advance(ctx, idem.PointOutcomeUnknown,
 *                                 debit), store.Keys.Advance in its Tx
 *   finish(), P_ERROR             idem.Pending: freed, 202, not stored
 *   finish(), P_SETTLED/REJECTED  the handler's final answer, completed with
 *                                 its writes (leased.complete)
 *   resolve()                     the handler resuming at
 *                                 PointOutcomeUnknown: ask, then resend
 *   Sweeper SWEEPABLE             DeleteExpired skips unfinished records
 *                                 (pgstore/sqlitestore sweep.go: finished)
 *   re-acquire of UNKNOWN         Keys.Reacquire keeps the life of an
 *                                 unfinished record (keys.go: reacquire)
 *   Completer                     completer.Completer.RunOnce: its listing
 *                                 is store.Store.FindUnfinished,
 *                                 its take-over ResumeUnfinished, fenced
 *                                 by the listed token (Middleware.Do with
 *                                 Call.Resumes)
 *
 * Retention: a record past retention that is re-acquired, or swept and
 * claimed again, starts a new life, a new payout with the same client key
 * (at most LIVES lives). The derived key is derived from the request's key
 * and the record's life (its created_at), so it is stable across the
 * retries of one payout and new for the next payout. An UNKNOWN recovery
 * point keeps its life: the sweeper skips it, a re-acquire resumes it.
 */

#ifndef LIVES
#define LIVES 2
#endif

#ifndef NCLIENT
#define NCLIENT 2
#endif

/* Provider faults and completer kills in a whole run: the provider
 * eventually answers, the completer eventually runs a round to its end. */
#ifndef FAULTS
#define FAULTS 2
#endif

#define S_NONE       0
#define S_PROCESSING 1
#define S_COMPLETED  2
#define S_FAILED     3

/* The recovery point, kept on the key's record. */
#define RP_NONE    0
#define RP_UNKNOWN 1  /* debited; the provider may or may not have executed */
#define RP_PAID    2
#define RP_FAILED  3  /* rejected by the provider, refunded */

/* The provider's record of an idempotency key; also a call's result. */
#define P_NONE     0
#define P_SETTLED  1
#define P_REJECTED 2
#define P_ERROR    3  /* no answer: failed before executing, or executed and did not answer */

/*
 * Provider keys: the derived key of life 0 or 1, or a fresh key. An attempt
 * derives its key once, when it holds the record.
 */
#ifdef BROKEN_KEY_PER_KEY
#define DERIVED 0
#else
#define DERIVED life
#endif
#define FRESH   2  /* a fresh key (BROKEN_FRESH_KEY only) */

#define COMPLETER 9  /* the completer's token */

/* The key's row (leased hold, as in key.pml). */
byte st = S_NONE;
byte tok = 0;
bool live = false;
bool expired = false;  /* past retention */
byte rp = RP_NONE;
byte resp = RP_NONE;  /* the stored final answer: RP_PAID or RP_FAILED */
byte life = 0;        /* the record's life: a new one after retention */

/* The provider. */
byte pst[3];       /* its record per key: P_NONE, P_SETTLED, P_REJECTED; kept for ever */
bool inflight[3];  /* a request with that key on its way, not executed yet */
byte faults = FAULTS;

/* Ghost state: the books of the payout of the current life. */
byte debits = 0;      /* balance taken for the payout */
byte refunds = 0;     /* amounts returned to the balance */
byte executions = 0;  /* transfers the provider executed (money left) */
byte answer = 0;      /* the first final answer a client got */

inline books() {
	assert(executions <= 1);  /* at most one provider execution per payout */
	assert(refunds <= 1);     /* a failed payout is refunded exactly once */
	assert(debits <= 1);
	assert(executions + refunds <= debits)  /* never paid and refunded, nothing paid undebited */
}

inline got(x) {
	if
	:: answer == 0 -> answer = x
	:: else -> assert(answer == x)
	fi
}

/* A new life of the record: a new payout, new books. */
inline new_life() {
	life++;
	debits = 0; refunds = 0; executions = 0; answer = 0;
	rp = RP_NONE; resp = RP_NONE
}

/* The provider executes a request with key k: once per key. */
inline execute(k) {
	if
	:: pst[k] == P_NONE ->
		if
		:: pst[k] = P_SETTLED; executions++
		:: pst[k] = P_REJECTED
		fi
	:: else
	fi;
	inflight[k] = false;
	books()
}

/* The provider: a request that was left in flight executes late. */
active proctype Provider() {
end:	do
	:: atomic { inflight[0] -> execute(0) }
	:: atomic { inflight[1] -> execute(1) }
	:: atomic { inflight[2] -> execute(2) }
	od
}

/* The clock: a lease lapses; a record passes its retention. */
active proctype Clock() {
end:	do
	:: atomic { st == S_PROCESSING && live -> live = false }
	:: atomic { st != S_NONE && !expired && life + 1 < LIVES -> expired = true }
	od
}

/*
 * The sweeper: deletes a record past retention, but not a live hold, nor
 * an UNKNOWN recovery point (which the completer must finish first).
 */
#ifdef BROKEN_SWEEP_UNKNOWN
#define SWEEPABLE (expired && !(st == S_PROCESSING && live))
#else
#define SWEEPABLE (expired && !(st == S_PROCESSING && live) && rp != RP_UNKNOWN)
#endif
active proctype Sweeper() {
end:	do
	:: atomic { st != S_NONE && SWEEPABLE -> st = S_NONE; tok = 0; live = false; expired = false; new_life() }
	od
}

/* POST to the provider with key k; res is what the caller learns. */
inline call(k, res) {
	inflight[k] = true;
	if
	:: atomic { faults > 0 -> faults--; inflight[k] = false; res = P_ERROR }  /* fails before executing */
	:: atomic { skip; execute(k); res = pst[k] }                             /* executes and answers */
	:: atomic { faults > 0 -> faults--; execute(k); res = P_ERROR }          /* executes, the answer is lost */
	:: atomic { faults > 0 -> faults--; res = P_ERROR }                      /* still in flight: executes late */
	fi
}

/* GET the provider's transfer by key k. */
inline lookup(k, res) {
	if
	:: res = pst[k]
	:: atomic { faults > 0 -> faults--; res = P_ERROR }
	fi
}

#define HELD(t) (tok == t && st == S_PROCESSING)
#define REACQUIRABLE (st == S_FAILED || (st == S_PROCESSING && !live))

/* Phase B: the outcome commits with the key's completion, fenced. */
inline finish(t, res) {
	atomic {
		if
		:: HELD(t) && res == P_SETTLED ->
			assert(executions == 1);  /* paid: this payout's money left */
			rp = RP_PAID; st = S_COMPLETED; live = false; resp = RP_PAID; got(RP_PAID)
		:: HELD(t) && res == P_REJECTED ->
			refunds++; books();
			rp = RP_FAILED; st = S_COMPLETED; live = false; resp = RP_FAILED; got(RP_FAILED)
		:: HELD(t) && res == P_ERROR ->  /* outcome unknown: free, 202 pending */
			st = S_FAILED; live = false
		:: else  /* fenced out: the phase rolls back */
		fi
	}
}

/*
 * Resolve an UNKNOWN recovery point: ask the provider by key k; a transfer
 * found is the outcome, none found means send again with the same key.
 */
inline resolve(t, k, res) {
	lookup(k, res);
	if
	:: res == P_NONE ->
#ifdef BROKEN_REFUND_ON_NOT_FOUND
		res = P_REJECTED
#else
		call(k, res)
#endif
	:: else
	fi;
	finish(t, res)
}

proctype Client(byte me) {
	byte prev;
	byte res;
	byte dk;  /* the derived key */
	byte r;   /* the recovery point this attempt read */

	/* Take the key, as Middleware.claim (hold.go) does (key.pml checks it in full). */
	atomic {
		if
		:: st == S_NONE -> st = S_PROCESSING; tok = me; live = true; goto held
		:: st == S_COMPLETED && !expired -> got(resp); goto done  /* replay */
		:: st == S_PROCESSING && live -> goto done                /* 409 */
		:: else -> prev = tok
		fi
	}
	atomic {
		if
		:: tok == prev && (REACQUIRABLE || (st == S_COMPLETED && expired)) ->
			if
			:: expired && rp != RP_UNKNOWN -> new_life()  /* past retention: a new payout */
			:: else
			fi;
			st = S_PROCESSING; tok = me; live = true; expired = false
		:: else -> goto done  /* lost the race: 409, the client retries later */
		fi
	}
held:
	/*
	 * Read the recovery point and the record's life (whence the derived
	 * key) in one statement fenced by the token: an attempt that lost its
	 * hold must not act on a later life's recovery point.
	 */
#ifdef BROKEN_UNFENCED_READ
	dk = DERIVED;
	r = rp;
#else
	atomic {
		if
		:: HELD(me) -> dk = DERIVED; r = rp
		:: else -> goto done
		fi
	}
#endif
	if
	:: goto done  /* killed before its first phase */
	:: r == RP_UNKNOWN -> resolve(me, dk, res); goto done
	:: r == RP_NONE ->
		atomic {  /* phase A: the debit and the recovery point, fenced */
			if
			:: HELD(me) -> debits++; books(); rp = RP_UNKNOWN
			:: else -> goto done
			fi
		}
	fi;
	if
	:: goto done  /* killed after phase A: UNKNOWN stays, the lease lapses */
	:: skip
	fi;
	call(dk, res);
	if
	:: goto done  /* killed after the call: the completer takes over */
	:: finish(me, res)
	fi;
done:	skip
}

/*
 * The completer: lists an UNKNOWN payout whose key was freed or
 * lapsed, takes it over only while it is still that record (fenced by the
 * token it was listed with, and UNKNOWN), and resolves it. It may be
 * killed mid-round (then another replica's completer goes on: the same
 * process, its hold left to lapse). It never holds a record that is not
 * unfinished: one it held with no recovery point would be freed
 * without one, binding a key no request used since.
 */
#ifdef BROKEN_COMPLETER_CLAIMS
#define TAKEOVER (st == S_NONE || REACQUIRABLE || (st == S_COMPLETED && expired))
#else
#define TAKEOVER (tok == prev && rp == RP_UNKNOWN && REACQUIRABLE)
#endif
active proctype Completer() {
	byte prev;
	byte res;
	byte dk;
end:	do
	:: atomic { rp == RP_UNKNOWN && REACQUIRABLE -> prev = tok }
	   atomic {
		if
		:: TAKEOVER ->
			if
			:: expired && rp != RP_UNKNOWN -> new_life()
			:: else
			fi;
			st = S_PROCESSING; tok = COMPLETER; live = true; expired = false;
			dk = DERIVED;
			assert(rp == RP_UNKNOWN)  /* only an unfinished record */
		:: else -> goto next
		fi
	   }
	   if
	   :: atomic { faults > 0 -> faults-- }; goto next  /* killed: the hold lapses */
	   :: skip
	   fi;
#ifdef BROKEN_FRESH_KEY
	   lookup(dk, res);
	   if
	   :: res == P_NONE -> call(FRESH, res)
	   :: else
	   fi;
	   finish(COMPLETER, res);
#else
	   resolve(COMPLETER, dk, res);
#endif
next:	   res = 0; prev = 0; dk = 0
	od
}

init {
	byte i = 1;
	atomic {
		do
		:: i <= NCLIENT -> run Client(i); i++
		:: else -> break
		od
	}
}

#ifdef LIVENESS
/* Every payout ends paid, or failed and refunded (or was never debited). */
ltl settles { <>[] (debits == executions + refunds && !inflight[0] && !inflight[1]) }
/*
 * No payout is held in the unknown state for ever. (A claim abandoned with
 * nothing debited is cleared by retention and the sweeper, which key.pml
 * verifies; here the last life's retention never passes.)
 */
ltl not_stuck { []<> !(st == S_PROCESSING && rp == RP_UNKNOWN) }
#endif
