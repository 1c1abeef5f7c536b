// Package keytable names a store's key table: the default, the check of a
// configured name, and the store's SQL rewritten for it. Every store
// writes its statements for Default and rewrites them once, at
// construction, for the configured name. It also encodes the table's
// provider_keys column, which the stores share.
package keytable

import (
	"fmt"
	"regexp"
	"strings"
)

// Default is the key table's name when none is configured.
const Default = "idempotency_keys"

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Check validates a configured name, a plain SQL identifier that the
// stores write into their statements unquoted; "" is Default.
func Check(name string) (string, error) {
	if name == "" {
		return Default, nil
	}
	if !identifier.MatchString(name) {
		return "", fmt.Errorf("table %q is not an identifier (letters, digits and _, not starting with a digit, at most 63)", name)
	}
	return name, nil
}

// Rewrite writes name into sql, written for Default; index and constraint
// names that begin with Default follow it.
func Rewrite(sql, name string) string { return strings.ReplaceAll(sql, Default, name) }

// Migrations is the table recording which migrations of the key table
// name are applied: idem_migrations for Default (as before the name was
// configurable), else the name with _migrations.
func Migrations(name string) string {
	if name == "" || name == Default {
		return "idem_migrations"
	}
	return name + "_migrations"
}

// Finished is true of a row that is not unfinished
// (store.Capabilities.RecoveryPoints): no recovery point, or COMPLETED.
// Only a finished row can pass its retention, be swept, or start a new
// life. Every store's SQL uses it.
const Finished = `(recovery_point IS NULL OR status = 'COMPLETED')`

// OutcomeUnknownType is store.OutcomeUnknownType, which this module cannot
// import: the type of idem-gateway's outcome-unknown problem.
const OutcomeUnknownType = "https://github.com/idem-dev/idem/blob/main/docs/problems.md#outcome-unknown"

// NotAwaitingOperator is true of a row that does not hold the
// outcome-unknown answer (store.AwaitsOperator): not COMPLETED, or not
// answered 409, or a body that does not name OutcomeUnknownType as a JSON
// string. contains(haystack, needle) is the dialect's byte search of a
// column for a string literal, true when it is found. A sweep deletes only
// such rows.
func NotAwaitingOperator(contains func(haystack, needle string) string) string {
	return `NOT coalesce(status = 'COMPLETED' AND response_code = 409 AND ` +
		contains("response_body", `'"`+OutcomeUnknownType+`"'`) + `, false)`
}
