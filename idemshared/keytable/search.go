package keytable

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Unfinished is true of an unfinished row
// (store.Capabilities.RecoveryPoints): the predicate of the key table's
// index of unfinished rows, written the same way so that the planner uses
// it.
const Unfinished = `recovery_point IS NOT NULL AND status <> 'COMPLETED'`

// Dialect is what Search needs to know of a store's SQL.
type Dialect struct {
	// Arg is the placeholder of the n-th argument, from 1: $1, ?1.
	Arg func(n int) string
	// Time is a time as the store keeps it.
	Time func(time.Time) any
	// PathPrefix, when set, is the condition that request_path begins
	// with the argument arg names, written with arg once; nil is
	// substr(request_path, 1, length(CAST(arg AS TEXT))) = arg.
	PathPrefix func(arg string) string
}

// Query is an operator's search, as store.KeyQuery says (this module
// does not import the core's): Status is a store.Status, Limit is at least
// one.
type Query struct {
	Scope, Key, Status string
	Unfinished         bool
	ResponseCode       int
	PathPrefix         string
	CreatedBefore      time.Time
	Limit              int
}

// Search is an operator's search on the default key table as one
// statement selecting cols, whose arguments follow args.
// Every search is served by an index: the key's, the primary key (scope),
// status and age, the unfinished rows', or the 4xx answers'. Without any of those it is one
// index scan by status and age per status, merged.
func Search(q Query, cols string, d Dialect, args ...any) (string, []any) {
	var where []string
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", d.Arg(len(args))))
	}
	if q.Scope != "" {
		add("scope = ?", q.Scope)
	}
	if q.Key != "" {
		add("idempotency_key = ?", q.Key)
	}
	if q.Unfinished {
		where = append(where, Unfinished)
	}
	if q.ResponseCode != 0 {
		// A literal, so that the planner sees it implies the predicate of
		// the partial index of 4xx answers.
		where = append(where, "response_code = "+strconv.Itoa(q.ResponseCode))
	}
	if q.PathPrefix != "" {
		cond := "substr(request_path, 1, length(CAST(? AS TEXT))) = ?"
		if d.PathPrefix != nil {
			cond = d.PathPrefix("?")
		}
		add(cond, q.PathPrefix)
	}
	if !q.CreatedBefore.IsZero() {
		add("created_at < ?", d.Time(q.CreatedBefore))
	}
	order := "created_at DESC"
	if q.Unfinished {
		order = "claimed_at"
	}
	args = append(args, q.Limit)
	tail := fmt.Sprintf(" ORDER BY %s LIMIT %s", order, d.Arg(len(args)))
	branch := func(status string) string {
		w := where
		if status != "" {
			w = append(w[:len(w):len(w)], "status = '"+status+"'")
		}
		sql := "SELECT " + cols + " FROM " + Default
		if len(w) > 0 {
			sql += " WHERE " + strings.Join(w, " AND ")
		}
		return sql
	}
	switch {
	case q.Status != "":
		return branch(q.Status) + tail, args
	case q.Scope != "" || q.Key != "" || q.Unfinished:
		return branch("") + tail, args
	case q.ResponseCode != 0:
		// Only a COMPLETED record holds a response: a scan of the other
		// states would walk all their rows and find none.
		return branch("COMPLETED") + tail, args
	}
	// No index leads with what is left: one scan of the status and age
	// index per status, each stopped at the limit.
	parts := make([]string, 0, 3)
	for i, s := range []string{"PROCESSING", "COMPLETED", "FAILED"} {
		parts = append(parts, fmt.Sprintf("SELECT * FROM (%s%s) AS s%d", branch(s), tail, i))
	}
	return strings.Join(parts, " UNION ALL ") + tail, args
}
