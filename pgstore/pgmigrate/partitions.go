package pgmigrate

import (
	"fmt"
	"strings"
)

// MaxPartitions bounds the partitions a migration may be asked for.
const MaxPartitions = 1024

// PartitionsDecl is how a migration that can hash-partition its tables
// declares, in a DO block, how many partitions to make: none, unless
// Partitions rewrites it.
const PartitionsDecl = "partitions constant integer := 0;"

// Partitions returns a Set.Rewrite that asks the migrations declaring
// PartitionsDecl for n partitions (0: none), after rewrite when that is
// not nil. It fails when n is not between 0 and MaxPartitions.
func Partitions(n int, rewrite func(string) string) (func(string) string, error) {
	if n < 0 || n > MaxPartitions {
		return nil, fmt.Errorf("partitions must be between 0 and %d, got %d", MaxPartitions, n)
	}
	decl := fmt.Sprintf("partitions constant integer := %d;", n)
	return func(sql string) string {
		sql = strings.Replace(sql, PartitionsDecl, decl, 1)
		if rewrite != nil {
			sql = rewrite(sql)
		}
		return sql
	}, nil
}
