package bench

import (
	"context"
	"errors"
	"fmt"
)

// SweepCheck is the key table after the sweep run, counted in SQL: the
// sweep must have deleted every expired record and nothing else.
type SweepCheck struct {
	ExpiredLeft int64 // records past retention still in the table; want 0
	Live        int64 // preloaded records within retention
	LiveWant    int64 // SweepRows - SweepExpired
	Fresh       int64 // records of the run's fresh requests
	FreshWant   int64 // the fresh requests answered 201
}

// checkSweep counts the key table of db after the run whose answers are
// got. It reads the whole table: seconds at 10 million records.
func checkSweep(ctx context.Context, db *database, got []answer, rows, expired int) (SweepCheck, error) {
	c := SweepCheck{LiveWant: int64(rows - expired)}
	for _, a := range got {
		if !a.replay && a.ok {
			c.FreshWant++
		}
	}
	err := db.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE expires_at <= now()),
       count(*) FILTER (WHERE idempotency_key LIKE 'pre-%' AND expires_at > now()),
       count(*) FILTER (WHERE idempotency_key NOT LIKE 'pre-%')
  FROM idempotency_keys`).Scan(&c.ExpiredLeft, &c.Live, &c.Fresh)
	if err != nil {
		return c, fmt.Errorf("check the key table: %w", err)
	}
	return c, nil
}

// err says what is wrong with the key table, if anything.
func (c SweepCheck) err() error {
	var errs []error
	if c.ExpiredLeft != 0 {
		errs = append(errs, fmt.Errorf("%d expired records left after the sweep", c.ExpiredLeft))
	}
	if c.Live != c.LiveWant {
		errs = append(errs, fmt.Errorf("%d live preloaded records after the sweep, want %d", c.Live, c.LiveWant))
	}
	if c.Fresh != c.FreshWant {
		errs = append(errs, fmt.Errorf("%d records of fresh requests, want one for each of the %d answered 201", c.Fresh, c.FreshWant))
	}
	return errors.Join(errs...)
}
