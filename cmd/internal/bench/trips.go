package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// tripsMetric is paymentsd's count of round trips to PostgreSQL on its
// /metrics (package roundtrip's counter).
const tripsMetric = "paymentsd_postgres_round_trips_total"

// roundTrips reads how many round trips to PostgreSQL v's server and its
// peer have made; -1 for one that does not count them, or is not there.
func roundTrips(ctx context.Context, v *variant) (server, peer int64, err error) {
	if server, err = tripsOf(ctx, v.srv); err != nil {
		return 0, 0, err
	}
	peer, err = tripsOf(ctx, v.peer)
	return server, peer, err
}

func tripsOf(ctx context.Context, s *server) (int64, error) {
	if s == nil || s.trips == nil {
		return -1, nil
	}
	return s.trips(ctx)
}

// countAt reads a count from url: the whole body (metric ""), or the value
// of the Prometheus metric named, -1 when the page has no such line (a
// build from before it).
func countAt(url, metric string) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, fmt.Errorf("round trips: %w", err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, fmt.Errorf("round trips: %w", err)
		}
		if metric == "" {
			return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), metric+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				return int64(f), err
			}
		}
		return -1, sc.Err()
	}
}
