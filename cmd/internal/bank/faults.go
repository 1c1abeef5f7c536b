package bank

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// Fault is a way the link to the bank misbehaves on one transfer request.
type Fault int

// The faults, in the order their probabilities are laid on [0, 1).
const (
	NoFault     Fault = iota
	ErrorBefore       // answer 500 without executing
	ErrorAfter        // execute, then answer 500
	SlowAfter         // execute, then answer after Config.SlowDelay
	ResetAfter        // execute, then reset the connection
	Hang              // never execute, never answer: hold until the client leaves or the server stops
)

var faultNames = [...]string{
	NoFault:     "none",
	ErrorBefore: "error-before",
	ErrorAfter:  "error-after",
	SlowAfter:   "slow-after",
	ResetAfter:  "reset-after",
	Hang:        "hang",
}

func (f Fault) String() string { return faultNames[f] }

// Faults gives each fault its probability per transfer request. The zero
// value injects none.
type Faults [len(faultNames)]float64

// ParseFaults reads a spec such as
// "error-before=0.05,error-after=0.05,slow-after=0.05,reset-after=0.05,hang=0.01":
// comma-separated name=probability pairs, each name at most once, the
// probabilities in [0, 1] and their sum at most 1. "" is no faults.
func ParseFaults(spec string) (Faults, error) {
	var fs Faults
	if strings.TrimSpace(spec) == "" {
		return fs, nil
	}
	seen := map[Fault]bool{}
	sum := 0.0
	for part := range strings.SplitSeq(spec, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Faults{}, fmt.Errorf("fault %q: want name=probability", part)
		}
		f := faultByName(name)
		if f == NoFault {
			return Faults{}, fmt.Errorf("unknown fault %q (want one of %s)", name, strings.Join(faultNames[ErrorBefore:], ", "))
		}
		if seen[f] {
			return Faults{}, fmt.Errorf("fault %q given twice", name)
		}
		seen[f] = true
		p, err := strconv.ParseFloat(value, 64)
		if err != nil || !(p >= 0 && p <= 1) {
			return Faults{}, fmt.Errorf("fault %q: probability %q is not a number in [0, 1]", name, value)
		}
		fs[f] = p
		sum += p
	}
	if sum > 1+1e-9 {
		return Faults{}, fmt.Errorf("fault probabilities sum to %g, more than 1", sum)
	}
	return fs, nil
}

func faultByName(name string) Fault {
	for f, n := range faultNames {
		if f != int(NoFault) && n == name {
			return Fault(f)
		}
	}
	return NoFault
}

// String is the spec ParseFaults reads back, "" for none.
func (fs Faults) String() string {
	var parts []string
	for f, p := range fs {
		if p > 0 {
			parts = append(parts, faultNames[f]+"="+strconv.FormatFloat(p, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

// Dice draws one fault per request from a seeded source: the same seed
// and the same sequence of requests give the same faults.
type Dice struct {
	faults Faults
	mu     sync.Mutex // guards rng
	rng    *rand.Rand
}

// NewDice draws faults with their probabilities from seed.
func NewDice(faults Faults, seed uint64) *Dice {
	return &Dice{faults: faults, rng: rand.New(rand.NewPCG(seed, seed))}
}

// Roll draws the next request's fault.
func (d *Dice) Roll() Fault {
	if d.faults == (Faults{}) {
		return NoFault
	}
	d.mu.Lock()
	x := d.rng.Float64()
	d.mu.Unlock()
	for f, p := range d.faults {
		if x < p {
			return Fault(f)
		}
		x -= p
	}
	return NoFault
}
