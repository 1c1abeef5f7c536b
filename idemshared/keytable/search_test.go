package keytable_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
)

var dialect = keytable.Dialect{
	Arg:  func(n int) string { return "$" + strconv.Itoa(n) },
	Time: func(t time.Time) any { return t },
}

// TestSearchResponseCodeReadsCompleted checks that a search by response
// code alone reads the COMPLETED records only, which alone hold a
// response: one statement the 4xx answers' index serves, where one branch
// per state made the in-flight and failed branches walk all their rows.
func TestSearchResponseCodeReadsCompleted(t *testing.T) {
	t.Parallel()
	sql, args := keytable.Search(keytable.Query{ResponseCode: 422, Limit: 50}, "scope", dialect)
	if strings.Contains(sql, "UNION") || strings.Count(sql, "status = ") != 1 || !strings.Contains(sql, "status = 'COMPLETED'") {
		t.Fatalf("want one branch over COMPLETED records, got %s", sql)
	}
	if !strings.Contains(sql, "response_code = 422") {
		t.Fatalf("want the code as a literal, got %s", sql)
	}
	if len(args) != 1 || args[0] != 50 {
		t.Fatalf("want the limit alone as argument, got %v", args)
	}
}

// TestSearchBrowseMergesStates checks the search with no condition: one
// scan per state, merged.
func TestSearchBrowseMergesStates(t *testing.T) {
	t.Parallel()
	sql, _ := keytable.Search(keytable.Query{Limit: 50}, "scope", dialect)
	if got := strings.Count(sql, "UNION ALL"); got != 2 {
		t.Fatalf("want three branches, got %d UNION ALL in %s", got, sql)
	}
}
