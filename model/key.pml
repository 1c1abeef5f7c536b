/*
 * The idempotency key protocol: NREQ requests carrying the same key, the
 * database as the arbiter, an abstract clock and the sweeper. docs/model.md
 * says what is modelled, what is abstracted and why that is sound.
 *
 * One model, selected by -D macros (scripts/model.sh runs them all):
 *
 *   MODE_LEASED    leased mode: the claim commits first, the lease is renewed
 *                  and fenced, the completion is fenced by the token and
 *                  commits with the handler's writes (leased.go: leased.hold,
 *                  complete, free; lease.go: keepLease).
 *   MODE_ATOMIC    atomic mode, claim first: claim, business write and
 *                  completion in one transaction (atomic.go: atomic.hold,
 *                  complete, free). rowlock is the claim's hold on the key:
 *                  its uncommitted row, or on pgstore the key's lock
 *                  (locked.go: locked.hold, store.TxOptions.LockKey),
 *                  taken with the handler's first statement, before any
 *                  of its writes (which are the effect, here at the
 *                  commit), under which the record is checked and a fresh
 *                  key's row written only at the commit, as here.
 *   MODE_DEFERRED  ModeAtomicDeferred: no claim before the
 *                  handler, one insert at the commit records the key
 *                  COMPLETED (pgstore insertCompletedOrAbort), a lost claim
 *                  reads the record and replays or claims first
 *                  (deferred.go: deferred.complete's store.ErrKeyExists;
 *                  run.go: settle hands execute a holder that claims first).
 *
 * The Go side: hold.go (Middleware.claim), run.go (run, settle), and the
 * files above. Each names this model; keep them in step.
 *
 *   LIVENESS       adds the LTL properties (run with pan -a -f).
 *
 * Broken variants, each of which must yield a counterexample:
 *
 *   BROKEN_NO_FENCE              the completion's UPDATE drops its
 *                                fencing_token condition.
 *   BROKEN_SELECT_INSERT         the claim is a SELECT, then an INSERT that
 *                                arbitrates nothing (an upsert, or no unique
 *                                index): the unique INSERT … ON CONFLICT DO
 *                                NOTHING replaced by a read.
 *   BROKEN_COMPLETE_OUTSIDE_TX   leased mode commits the handler's writes,
 *                                then completes the key in a second
 *                                transaction.
 *   BROKEN_NO_MAX_LIFE           the lease is renewed for as long as the
 *                                process lives (the design before the
 *                                lease's maximum life).
 */

#ifndef NREQ
#define NREQ 3
#endif

/* maxClaimRounds: the insert/re-acquire loop of Middleware.claim (hold.go). */
#ifndef MAXROUNDS
#define MAXROUNDS 4
#endif

/*
 * The lease's maximum life (Config.MaxLeaseLife), counted in renewals:
 * keepLease renews every third of Config.LeaseDuration, so a maximum life
 * is a bounded number of renewals. Past it renewal stops and the handler's
 * context is cancelled with ErrLeaseMaxLife.
 */
#ifndef MAXRENEW
#define MAXRENEW 1
#endif

/* idempotency_keys.status; S_NONE: no row. */
#define S_NONE       0
#define S_PROCESSING 1
#define S_COMPLETED  2
#define S_FAILED     3

/* The committed row of the key (pgstore keys.go). */
byte st = S_NONE;
byte tok = 0;          /* fencing_token: the token of the attempt that holds it */
bool live = false;     /* lease_expires_at > now() */
bool expired = false;  /* expires_at <= now(): past retention */
byte resp = 0;         /* the stored response: the token of the attempt that made it */
/*
 * The transaction that holds the row (an uncommitted insert or update), 0:
 * none. Another transaction's INSERT or UPDATE of the row waits for it, a
 * plain read does not (READ COMMITTED), the sweeper skips it (SKIP LOCKED).
 */
byte rowlock = 0;

/* Ghost state: what the properties are about. */
byte effects = 0;  /* business effects committed in the current retention period */
byte answer = 0;   /* the first final answer a client got in the current period */

/* A new retention period: a new row, or a row past retention re-acquired. */
inline new_period() {
	effects = 0;
	answer = 0
}

/* A client gets final answer x (its own response, or a replay). */
inline got(x) {
	if
	:: answer == 0 -> answer = x
	:: else -> assert(answer == x)
	fi
}

/* A business effect commits. */
inline effect() {
	effects++;
	assert(effects <= 1)
}

/* Keys.Reacquire's WHERE clause, but for the token. */
#define REACQUIRABLE (st == S_FAILED || (st == S_PROCESSING && !live) || (st == S_COMPLETED && expired))

/* The fenced completion's WHERE clause (pgstore keys.go: complete, completeOrAbort). */
#ifdef BROKEN_NO_FENCE
#define FENCED(t) (st == S_PROCESSING)
#else
#define FENCED(t) (tok == t && st == S_PROCESSING)
#endif

/* A claimed row: pgsql.InsertClaim, or Reacquire's SET. */
inline claim_row(t) {
	st = S_PROCESSING;
	tok = t;
	live = true;
	expired = false;
	resp = 0
}

/* A completed row, as a completion or the deferred claim leaves it. */
inline complete_row(t) {
	st = S_COMPLETED;
	tok = t;
	resp = t;
	live = false;
	expired = false
}

/*
 * The abstract clock: a lease lapses (no successful renewal for a whole
 * Config.LeaseDuration, whether the holder stalled, was killed or its renewals
 * failed) and a record passes its retention, at any moment.
 */
active proctype Clock() {
end:	do
	:: atomic { st == S_PROCESSING && live -> live = false }
	:: atomic { st != S_NONE && !expired -> expired = true }
	od
}

/*
 * The sweeper (pgstore sweep.go, deleteExpired): deletes a record past retention,
 * except a PROCESSING record with a live lease; skips a row another
 * transaction holds.
 */
active proctype Sweeper() {
end:	do
	:: atomic {
		rowlock == 0 && st != S_NONE && expired && (st != S_PROCESSING || !live) ->
		st = S_NONE; tok = 0; live = false; expired = false; resp = 0
	}
	od
}

#ifdef MODE_LEASED
/*
 * One leased-mode request (leased.hold, then run.go's run and settle: the
 * handler's outcome, then leased.complete or leased.free); its token
 * is me.
 */
proctype Request(byte me) {
	byte prev;
	byte rounds = 0;
	byte renewals = 0;
	bool stopped = false;

	/* Middleware.claim (hold.go): Keys.Insert, else answer, then Keys.Reacquire. */
claim:
	if
	:: rounds == MAXROUNDS -> goto done  /* busy: 409 */
	:: else -> rounds++
	fi;
#ifdef BROKEN_SELECT_INSERT
	if
	:: st == S_NONE ->  /* SELECT found no row */
		atomic {
			if
			:: st == S_NONE -> new_period()
			:: else
			fi;
			claim_row(me)
		}
		goto held
	:: else
	fi;
#else
	atomic {  /* Keys.Insert: INSERT … ON CONFLICT DO NOTHING, autocommitted */
		if
		:: st == S_NONE -> new_period(); claim_row(me); goto held
		:: else
		fi
	}
#endif
	atomic {  /* Keys.Insert's second statement reads the row; answer */
		if
		:: st == S_NONE -> goto claim                             /* swept in between */
		:: st == S_COMPLETED && !expired -> got(resp); goto done  /* answer: replay */
		:: st == S_PROCESSING && live -> goto done                /* answer: 409 in flight */
		:: else -> prev = tok                                     /* not answered: re-acquire */
		fi
	}
	atomic {  /* Keys.Reacquire: a compare-and-swap on the previous token */
		if
		:: tok == prev && REACQUIRABLE ->
			if
			:: expired -> new_period()  /* a row past retention starts a new life */
			:: else
			fi;
			claim_row(me);
			goto held
		:: else -> goto claim
		fi
	}

	/*
	 * The handler runs while keepLease renews the lease (Keys.Renew, fenced
	 * by the token). Renewal stops on store.ErrNotHeld, and at the lease's
	 * maximum life. A process that stalls is one that takes no step here
	 * while the clock lets its lease lapse; it may wake up and go on.
	 */
held:
	do
	:: goto done  /* killed, or hung past the maximum life: nothing freed, the lease lapses */
	:: break      /* the handler returns */
	:: !stopped && renewals < MAXRENEW ->
		atomic {
			if
			:: tok == me && st == S_PROCESSING -> live = true
			:: else -> stopped = true  /* store.ErrNotHeld: the handler is cancelled */
			fi
		}
#ifndef BROKEN_NO_MAX_LIFE
		renewals++
#endif
	od;
	if
	:: goto final
	:: goto retriable  /* 5xx, 408, 429, or the hold ended (settle: lease-lost) */
	fi;

final:
#ifdef BROKEN_COMPLETE_OUTSIDE_TX
	effect();   /* the handler's transaction commits on its own */
	if
	:: goto done  /* killed between the two commits */
	:: skip
	fi;
	atomic {
		if
		:: FENCED(me) -> assert(tok == me); complete_row(me); got(me)
		:: else
		fi
	}
#else
	atomic {  /* leased.complete: the fenced completion, committed with the handler's writes (completeAndCommit) */
		if
		:: FENCED(me) ->
			assert(tok == me);  /* a fenced-out attempt never completes */
			effect();
			complete_row(me);
			got(me)
		:: else -> skip  /* store.ErrNotHeld: the handler's writes roll back, 409 lease-lost */
		fi
	}
#endif
	goto done;

retriable:
	if
	:: goto done  /* killed before the freeing: the lease lapses */
	:: atomic {   /* leased.free: Keys.Fail, fenced */
		skip;  /* an option must not begin with an if (Promela's else) */
		if
		:: tok == me && st == S_PROCESSING -> st = S_FAILED; live = false
		:: else
		fi
	   }
	fi;
done:	skip
}
#endif

#if defined(MODE_ATOMIC) || defined(MODE_DEFERRED)
/*
 * One atomic-mode request (atomic.hold, or deferred.hold with
 * ModeAtomicDeferred); its first token is me, the second pass of a lost
 * deferred claim (Middleware.execute's loop) uses me + NREQ. A transaction's
 * writes are this process's locals until its commit, one atomic step; a
 * killed process's transaction rolls back.
 */
proctype Request(byte me) {
	byte t = me;
	byte prev;
	byte rounds = 0;
	bool fresh = false;  /* committing starts a new retention period */
#ifdef BROKEN_SELECT_INSERT
	bool blind = false;  /* claimed by an INSERT that arbitrated nothing */
#endif

#ifdef MODE_DEFERRED
	atomic {  /* Middleware.execute (request.go): fromStore's Store.Get, then answer */
		if
		:: st == S_NONE -> skip
		:: st == S_COMPLETED && !expired -> got(resp); goto done
		:: st == S_PROCESSING && live -> goto done
		:: else -> goto claimfirst  /* a record to re-acquire: claim it first */
		fi
	}
	/* The handler runs in the transaction, the claim held back. */
	if
	:: goto done  /* killed, or the client left: rolled back, nothing was claimed */
	:: atomic {   /* retriable: the deferred claim never ran, settle reads the record (fromStore), a recorded answer wins */
		skip;
		if
		:: st == S_COMPLETED && !expired -> got(resp)
		:: else
		fi
	   }
	   goto done
	:: skip       /* final */
	fi;
	/* The deferred claim (deferred.complete): insertCompletedOrAbort pipelined with the COMMIT. */
#ifdef BROKEN_SELECT_INSERT
	if
	:: st == S_NONE ->
		atomic {
			if
			:: st == S_NONE -> new_period()
			:: else
			fi;
			effect();
			complete_row(t);
			got(t)
		}
		goto done
	:: else
	fi;
#else
	do
	:: atomic {
		rowlock == 0 ->
		if
		:: st == S_NONE -> new_period(); effect(); complete_row(t); got(t); goto done
		:: else -> break  /* ErrKeyExists: the whole transaction aborts */
		fi
	   }
	:: rowlock != 0 -> goto done  /* ErrWaitTimeout: 409 */
	od;
#endif
	atomic {  /* store.ErrKeyExists: rolled back; settle reads the record (fromStore), or claims first */
		if
		:: st == S_COMPLETED && !expired -> got(resp); goto done
		:: st == S_PROCESSING && live -> goto done
		:: else -> t = me + NREQ  /* re-acquirable, or gone: claim first this time */
		fi
	}
#endif

	/* Claim first (atomic.hold): Middleware.claim inside the transaction. */
claimfirst:
	if
	:: rounds == MAXROUNDS -> goto done
	:: else -> rounds++
	fi;
#ifdef BROKEN_SELECT_INSERT
	if
	:: st == S_NONE -> blind = true; goto held  /* SELECT found no row; the INSERT waits for nobody */
	:: else
	fi;
#else
	do
	:: atomic {  /* Keys.Insert: waits for a transaction holding the key */
		rowlock == 0 ->
		if
		:: st == S_NONE -> rowlock = t; fresh = true; goto held
		:: else -> break
		fi
	   }
	:: rowlock != 0 -> goto done  /* ErrWaitTimeout: 409 */
	od;
#endif
	atomic {  /* the committed row, read by a new statement; answer */
		if
		:: st == S_NONE -> goto claimfirst
		:: st == S_COMPLETED && !expired -> got(resp); goto done
		:: st == S_PROCESSING && live -> goto done
		:: else -> prev = tok
		fi
	}
	do
	:: atomic {  /* Keys.Reacquire: waits for the row, then re-checks its WHERE clause */
		rowlock == 0 ->
		if
		:: tok == prev && REACQUIRABLE -> rowlock = t; fresh = expired; goto held
		:: else -> goto claimfirst
		fi
	   }
	:: rowlock != 0 -> goto done
	od;

held:	/* the handler runs in the transaction that holds the claim */
	if
	:: rowlock = (rowlock == t -> 0 : rowlock)  /* killed, client gone, or a retriable answer: atomic.free rolls back */
	:: atomic {  /* final: atomic.complete, the completion and the handler's writes commit (completeAndCommit) */
		skip;
#ifdef BROKEN_SELECT_INSERT
		if
		:: blind && st == S_NONE -> fresh = true
		:: else
		fi;
#endif
		if
		:: fresh -> new_period()
		:: else
		fi;
		effect();
		complete_row(t);
		got(t);
		rowlock = 0
	   }
	fi;
done:	skip
}
#endif

init {
	byte i = 1;
	atomic {
		do
		:: i <= NREQ -> run Request(i); i++
		:: else -> break
		od
	}
}

#ifdef LIVENESS
/* Every key eventually gets a final answer or becomes free, for good. */
ltl settles { <>[] (rowlock == 0 && !(st == S_PROCESSING && live)) }
/* No key is PROCESSING for ever. */
ltl not_stuck { []<> (st != S_PROCESSING) }
#endif
