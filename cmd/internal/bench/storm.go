package bench

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/idem-dev/idem/payments/api"
)

// runStorm sends each key from StormClients clients at once, in
// Concurrency/StormClients groups, and waits for all answers before the
// next key.
func runStorm(ctx context.Context, v *variant, wl *workload, conc, clients int, w window) (*tally, error) {
	c := newHTTPClient(conc)
	defer c.CloseIdleConnections()
	groups := conc / clients
	return closedLoop(ctx, groups, w, func(r *rand.Rand, t *tally) error {
		rq := wl.fresh(r, v)
		k := sentKey{rq: rq, outcomes: make([]outcome, clients)}
		times := make([][2]time.Time, clients)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range clients {
			wg.Go(func() {
				<-start
				t0 := time.Now()
				k.outcomes[i] = send(ctx, c, v.srv.base, rq, true)
				times[i] = [2]time.Time{t0, time.Now()}
			})
		}
		close(start)
		wg.Wait()
		for i, o := range k.outcomes {
			t.add(w, times[i][0], times[i][1], o, stormOK(o))
		}
		t.sent = append(t.sent, k)
		return nil
	})
}

// stormOK: what a duplicate may legitimately get. 201 (it ran, or it is a
// replay) or 409 for a request still in flight (leased mode); never a net's
// 409 or a 5xx.
func stormOK(o outcome) bool {
	if o.err != nil {
		return false
	}
	switch o.status {
	case http.StatusCreated:
		return true
	case http.StatusConflict:
		return !isNet(o)
	}
	return false
}

func isNet(o outcome) bool {
	var p api.Problem
	return o.status == http.StatusConflict && json.Unmarshal(o.body, &p) == nil && p.Type == api.TypeURI(api.ProblemDuplicate)
}
