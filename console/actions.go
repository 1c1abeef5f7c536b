package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// The actions an operator can take on a record.
const (
	actionReopen = "reopen"
	actionAnswer = "answer"
	actionRetry  = "retry"
)

// describe is a record's state as the audit log keeps it, in one line.
func (c *Console) describe(rec *store.Record) string {
	if rec == nil {
		return "no record"
	}
	return store.DescribeRecord(rec, c.state(rec))
}

// action serves one of the actions. The form names the record and the
// fencing token its page showed: the action changes the record only if no
// attempt or operator has changed it since, as the CLI's are fenced.
func (c *Console) action(kind string) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		ctx := r.Context()
		ref := store.KeyRef{Scope: r.PostFormValue("scope"), Key: r.PostFormValue("key")}
		token, reason := r.PostFormValue("token"), strings.TrimSpace(r.PostFormValue("reason"))
		back := base(r) + "key?" + keyQuery(ref)
		v := &view{Title: "Action", Session: s, Data: back}
		fail := func(status int, msg string) {
			v.Error = msg
			c.render(w, r, status, "done", v)
		}
		if r.PostFormValue("confirm") != "yes" {
			fail(http.StatusBadRequest, "An action needs a reason and the confirmation box ticked. Nothing changed.")
			return
		}
		if err := store.CheckReason(reason); err != nil {
			fail(http.StatusBadRequest, invalid(err))
			return
		}
		if !c.caps.AuditLog {
			fail(http.StatusNotImplemented, "This store keeps no audit log (store.Capabilities.AuditLog): actions are off. Nothing changed.")
			return
		}
		rec, err := c.cfg.Store.Get(ctx, ref.Scope, ref.Key)
		if err != nil {
			fail(http.StatusConflict, fmt.Sprintf("Cannot read the record: %v. Nothing changed.", err))
			return
		}
		if rec.Token != token {
			fail(http.StatusConflict, "The record changed since its page was shown (another attempt or operator took it). Nothing changed: look at it again.")
			return
		}
		rw := row{Record: *rec, State: c.state(rec)}
		entry := func(what string, after *store.Record) store.AuditEntry {
			return store.AuditEntry{
				Actor: s.Name + " from " + r.RemoteAddr, Action: kind + ": " + what, Reason: reason,
				Scope: ref.Scope, Key: ref.Key, Before: c.describe(rec), After: c.describe(after),
			}
		}
		done := func(what string) {
			c.log(ctx, slog.LevelWarn, "console: operator action", "operator", s.Name, "action", kind, "scope", ref.Scope, "key", ref.Key, "reason", reason, "result", what)
			http.Redirect(w, r, back+"&done="+kind, http.StatusSeeOther)
		}
		notHeld := func() {
			fail(http.StatusConflict, "The record changed while the action ran (a retry took the key over, or another operator acted first). Nothing changed: look at it again.")
		}
		if kind == actionRetry {
			if ok, why := c.canRetry(&rw); !ok {
				fail(http.StatusConflict, fmt.Sprintf("Key %q cannot be retried now. %s Nothing changed.", ref.Key, why))
				return
			}
			what, after, err := c.retry(ctx, store.Unfinished{KeyRef: ref, Fingerprint: rec.Fingerprint, Point: rec.RecoveryPoint, Token: token})
			if errors.Is(err, store.ErrNotHeld) {
				notHeld()
				return
			}
			if aerr := c.cfg.Store.AppendAudit(ctx, entry(what, after)); aerr != nil {
				c.log(ctx, slog.LevelError, "console: the action ran but its audit entry was not written", "action", kind, "key", ref.Key, "err", aerr)
				fail(http.StatusInternalServerError, fmt.Sprintf("The action ran (%s) but its audit entry could not be written: %v.", what, aerr))
				return
			}
			if err != nil {
				c.log(ctx, slog.LevelWarn, "console: operator action", "operator", s.Name, "action", kind, "scope", ref.Scope, "key", ref.Key, "reason", reason, "result", what)
				fail(http.StatusBadGateway, "The action failed: "+what)
				return
			}
			done(what)
			return
		}
		if ok, why := c.canResolve(&rw); !ok {
			fail(http.StatusConflict, fmt.Sprintf("Key %q is %s, not an unknown outcome. %s Nothing changed.", ref.Key, rw.State, why))
			return
		}
		var (
			what   string
			answer *store.Response
		)
		if kind == actionReopen {
			what = "reopened the key: its next retry runs afresh"
		} else {
			resp, err := answerOf(r)
			if err != nil {
				fail(http.StatusBadRequest, invalid(err))
				return
			}
			what = fmt.Sprintf("recorded the real answer %d: every retry gets it", resp.StatusCode)
			answer = &resp
		}
		err = store.Resolve(ctx, c.cfg.Store, rec, answer, func(after *store.Record) store.AuditEntry { return entry(what, after) })
		switch {
		case errors.Is(err, store.ErrNotHeld):
			notHeld()
		case errors.Is(err, store.ErrInvalidAction):
			fail(http.StatusBadRequest, invalid(err))
		case err != nil:
			c.log(ctx, slog.LevelError, "console: action failed", "action", kind, "key", ref.Key, "err", err)
			fail(http.StatusInternalServerError, fmt.Sprintf("The action failed: %v. Nothing changed: the action and its audit entry commit together or not at all.", err))
		default:
			done(what)
		}
	}
}

// retry asks the completer to make one attempt at u now, and returns what
// it did and the record after it. The attempt takes the key over, calls
// downstream and completes in transactions of its own: its audit entry
// follows it, written once the attempt has ended.
func (c *Console) retry(ctx context.Context, u store.Unfinished) (string, *store.Record, error) {
	res := c.cfg.ResumeFunc(ctx, u)
	what := fmt.Sprintf("asked the completer to retry now: %s", res.Outcome)
	if res.Response != nil {
		what += fmt.Sprintf(", answer %d", res.Response.StatusCode)
	}
	if res.Err != nil {
		what += fmt.Sprintf(" (failed: %v)", res.Err)
	}
	after, err := c.cfg.Store.Get(ctx, u.Scope, u.Key)
	if err != nil {
		after = nil
	}
	return what, after, res.Err
}

// answerOf is the real answer an operator records: a status, a
// Content-Type, a Location and a body, checked as every door checks it
// (store.CheckAnswer).
func answerOf(r *http.Request) (store.Response, error) {
	status, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("status")))
	if err != nil {
		return store.Response{}, fmt.Errorf("%w: status %q is not a number", store.ErrInvalidAction, r.PostFormValue("status"))
	}
	resp := store.Response{StatusCode: status, Header: http.Header{}, Body: []byte(strings.ReplaceAll(r.PostFormValue("body"), "\r\n", "\n"))}
	if ct := strings.TrimSpace(r.PostFormValue("content_type")); ct != "" && len(resp.Body) > 0 {
		resp.Header.Set("Content-Type", ct)
	}
	if loc := strings.TrimSpace(r.PostFormValue("location")); loc != "" {
		resp.Header.Set("Location", loc)
		resp.ResourceType, resp.ResourceID = idem.ResourceOf(loc)
	}
	return resp, store.CheckAnswer(resp)
}

// invalid is the page's message for an action store.ErrInvalidAction
// refused.
func invalid(err error) string {
	return "Refused: " + strings.TrimPrefix(err.Error(), store.ErrInvalidAction.Error()+": ") + ". Nothing changed."
}
