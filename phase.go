package idem

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"

	"github.com/idem-dev/idem/store"
)

// Recovery points: a leased-mode handler that calls something that cannot
// roll back (a bank) splits its work into phases. Each phase commits its
// writes together with the recovery point it reached (Advance); a retry,
// or a completer (package completer), that takes the key over resumes at
// the last point (RecoveryPoint) instead of starting again. docs/payouts.md says
// when to use them, with a payout as the example.
//
// The flow and its rules are model-checked: model/payout.pml is the
// design, and this file, the stores' recovery points and package completer
// must agree with it. The rules, as docs/model.md numbers its findings:
//
//  1. Resend with the same derived key (ProviderKey), never a fresh one.
//  2. Refund only on a definitive rejection, never because the provider
//     knows no transfer: PointOutcomeUnknown is left only by asking.
//  3. An unfinished record (a point, not COMPLETED) is never swept, and a
//     re-acquire resumes it in its life (the stores' Keys.Advance).
//  4. The derived key includes the record's life (its created_at).
//  5. The point and the life are read in one statement fenced by the
//     hold's token (store.Keys.Progress), once per attempt.
//
// The derived key is recorded on the record with a recovery point and
// read back from it by every later attempt, so that rule 1 holds across a
// change of Config.ProviderKeySecret.

// PointOutcomeUnknown is the recovery point of a call whose outcome is not
// known: its request may have been sent, so the downstream may have acted.
// Advance to it before the call. A handler that resumes at it must ask the
// downstream by the same ProviderKey and, when the downstream knows no
// such request, send it again with that same key; it must never treat the
// point as "never happened" (no refund, no fresh key).
const PointOutcomeUnknown = "outcome-unknown"

// Errors of the recovery-point API.
var (
	// ErrNoRecoveryPoints: the context is not a leased-mode handler's on a store
	// with recovery points (store.Capabilities.RecoveryPoints).
	ErrNoRecoveryPoints = errors.New("idem: recovery points need a leased-mode handler on a store that keeps them")
	// ErrNoProviderKeySecret: ProviderKey was called with no
	// Config.ProviderKeySecret.
	ErrNoProviderKeySecret = errors.New("idem: ProviderKey needs Config.ProviderKeySecret")
)

// MinProviderKeySecret is the shortest Config.ProviderKeySecret accepted,
// in bytes.
const MinProviderKeySecret = 16

// recovery is the recovery-point state of one attempt: the handler's hold on
// its key, and the progress the fenced read found, read once.
type recovery struct {
	m *Middleware
	a store.Attempt

	mu       sync.Mutex // guards the fields below
	loaded   bool
	progress store.Progress // its ProviderKeys are the recorded ones
	// derived are the provider keys this attempt derived that the record
	// does not hold yet: the next phase records them.
	derived map[string]string
	pending bool
}

// inPhaseKey marks the context Advance gives fn: a key ProviderKey derives
// there is recorded by that phase, whose transaction holds the record.
type inPhaseKey struct{}

// isPending reports whether the handler asked, through Pending, for its
// answer not to be stored.
func (p *recovery) isPending() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}

func recoveryFrom(ctx context.Context) (*recovery, error) {
	a := attemptFrom(ctx)
	if a == nil || a.rec == nil {
		return nil, ErrNoRecoveryPoints
	}
	return a.rec, nil
}

// load reads the progress once per attempt: the recovery point and the life
// in one statement fenced by the token (model/payout.pml, the Client's
// "held:" step; rule 5).
func (p *recovery) load(ctx context.Context) (store.Progress, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loaded {
		return p.progress, nil
	}
	ph, err := p.m.store.Progress(ctx, p.a)
	if err != nil {
		return store.Progress{}, fmt.Errorf("idem: read recovery point: %w", err)
	}
	p.progress, p.loaded = ph, true
	return ph, nil
}

// RecoveryPoint returns the recovery point the handler's attempt resumes at: ""
// for a request that starts afresh, else the last point a phase of an
// earlier attempt committed (Advance), or this attempt's own since. It
// fails with store.ErrNotHeld (wrapped) when the attempt no longer holds
// its key: the handler must then stop, since the point it would act on may
// be another attempt's. It needs a leased-mode handler's context on a store
// with recovery points, else ErrNoRecoveryPoints.
func RecoveryPoint(ctx context.Context) (string, error) {
	p, err := recoveryFrom(ctx)
	if err != nil {
		return "", err
	}
	ph, err := p.load(ctx)
	return ph.Point, err
}

// Advance runs one phase: fn's writes, the recovery point point and the
// provider keys derived since the last phase (ProviderKey) commit in one
// transaction of the store, fenced by the attempt's token, before Advance
// returns. fn runs with a context that carries that transaction
// (pgstore.DB, sqlitestore.DB reach it), not the request's. When fn fails,
// or the attempt no longer holds its key (store.ErrNotHeld, wrapped),
// nothing of the phase commits and the point stays where it was. point must
// not be empty: nothing sets a record back to "nothing happened". fn may be
// nil, for a phase that only records its point.
//
// The handler's last phase is not an Advance: its writes go in the
// request's own transaction, which commits with the key's completion and
// the stored response.
func Advance(ctx context.Context, point string, fn func(ctx context.Context) error) error {
	p, err := recoveryFrom(ctx)
	if err != nil {
		return err
	}
	if point == "" {
		return errors.New("idem: Advance: the recovery point is empty")
	}
	if _, err := p.load(ctx); err != nil {
		return err
	}
	return p.advance(ctx, point, fn)
}

// advance commits one phase, with the provider keys derived since the
// last: Advance's work, once the progress is loaded.
func (p *recovery) advance(ctx context.Context, point string, fn func(ctx context.Context) error) error {
	p.mu.Lock()
	derived := maps.Clone(p.derived)
	p.mu.Unlock()
	tx, err := p.m.store.Begin(ctx, store.TxOptions{MaxWait: p.m.cfg.WaitTimeout})
	if err != nil {
		return fmt.Errorf("idem: advance to %s: begin: %w", point, err)
	}
	rollback := func(err error) error {
		return errors.Join(err, tx.Rollback(context.WithoutCancel(ctx)))
	}
	// The fenced update comes first: a lost hold is found before fn
	// writes anything, and the row stays locked by this phase until it
	// commits.
	if err := tx.Advance(ctx, p.a, point, derived); err != nil {
		return rollback(fmt.Errorf("idem: advance to %s: %w", point, err))
	}
	if fn != nil {
		if err := fn(context.WithValue(tx.Context(ctx), inPhaseKey{}, p)); err != nil {
			return rollback(err)
		}
		// Keys fn derived go with this phase: a phase of their own would
		// wait for the row this one holds.
		p.mu.Lock()
		during := map[string]string{}
		for provider, key := range p.derived {
			if _, ok := derived[provider]; !ok {
				during[provider] = key
			}
		}
		p.mu.Unlock()
		if len(during) > 0 {
			if err := tx.Advance(ctx, p.a, point, during); err != nil {
				return rollback(fmt.Errorf("idem: advance to %s: %w", point, err))
			}
			if derived == nil {
				derived = map[string]string{}
			}
			maps.Copy(derived, during)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		// The commit's outcome may be unknown: the next attempt's fenced
		// read says where the record stands.
		return fmt.Errorf("idem: advance to %s: commit: %w", point, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.progress.Point = point
	for provider, key := range derived {
		if p.progress.ProviderKeys == nil {
			p.progress.ProviderKeys = map[string]string{}
		}
		p.progress.ProviderKeys[provider] = key
		delete(p.derived, provider)
	}
	return nil
}

// Pending says that the handler's answer is not its last word: the
// operation stands at a recovery point (PointOutcomeUnknown, say: the bank
// did not answer) and must be finished later. The middleware then sends
// the handler's answer (202 and a pending status, say) to this client
// only, does not store it, rolls back the request's own transaction (the
// committed phases stay) and frees the key, so that the client's retry,
// or a completer, resumes the operation at its point. It fails when no
// phase has committed a point: there is nothing to resume.
func Pending(ctx context.Context) error {
	p, err := recoveryFrom(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.progress.Point == "" {
		return errors.New("idem: Pending: no recovery point to resume at")
	}
	p.pending = true
	return nil
}

// ProviderKey returns the idempotency key to send to the downstream named
// provider for this operation: an HMAC-SHA256, under
// Config.ProviderKeySecret, of the scope, the request's key, the record's
// life (its creation time, from the fenced read) and provider. It is the
// same for every attempt of one operation, on every replica (resend with
// it, never a fresh key); it changes when the key is reused after
// retention, so that the provider's deduplication never hands back the
// previous operation's result; and without the secret it cannot be
// guessed from the client's key.
//
// The key is derived once per operation and recorded on the key's record:
// with the first phase (Advance) when none has committed yet, or when
// called inside a phase's fn, with that phase: either must commit before
// the key is sent; else before ProviderKey returns. Every later
// attempt gets the recorded key, whatever the secret is then: changing the
// secret never changes the key of an operation under way. It needs a
// leased-mode handler's context (ErrNoRecoveryPoints) and, to derive, the secret
// (ErrNoProviderKeySecret).
func ProviderKey(ctx context.Context, provider string) (string, error) {
	p, err := recoveryFrom(ctx)
	if err != nil {
		return "", err
	}
	ph, err := p.load(ctx)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	key, ok := p.progress.ProviderKeys[provider]
	if !ok {
		key, ok = p.derived[provider]
	}
	p.mu.Unlock()
	if ok {
		return key, nil
	}
	secret := p.m.cfg.ProviderKeySecret
	if len(secret) == 0 {
		return "", ErrNoProviderKeySecret
	}
	key = deriveKey(secret, p.a.Scope, p.a.Key, ph, provider)
	p.mu.Lock()
	if p.derived == nil {
		p.derived = map[string]string{}
	}
	p.derived[provider] = key
	point := p.progress.Point
	p.mu.Unlock()
	if point != "" && ctx.Value(inPhaseKey{}) == nil {
		// A phase has committed: the operation may have reached a
		// downstream already. The key is recorded before it is used.
		// (Inside a phase's fn, that phase records it as it commits.)
		if err := p.advance(ctx, point, nil); err != nil {
			return "", err
		}
	}
	return key, nil
}

// deriveKey is ProviderKey's derivation. Each part is length-prefixed, so
// no two tuples share an input.
func deriveKey(secret []byte, scope, key string, ph store.Progress, provider string) string {
	mac := hmac.New(sha256.New, secret)
	for _, part := range []string{"idem provider key v1", scope, key, strconv.FormatInt(ph.Life.UnixMicro(), 10), provider} {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return "idem_" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
