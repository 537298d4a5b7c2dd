package backendkit

import (
	"math"
	"time"
)

// adaptive is the controller behind [Coalescer.Adapt]: how many round trips
// a backend keeps in flight follows their measured latency, in the manner
// of TCP Vegas. Round trips are grouped by how many operations they carry
// (1, 2-3, 4-7, 8-15, 16 and more), since a larger batch takes longer
// without anything queuing; for each class it keeps the smoothed latency
// and the best of the last few seconds. Their ratio says whether round
// trips queue at the server: while they take less than 1.25 times their
// best, one more in flight costs nothing and the limit grows (by about one
// per limit's worth of round trips); above twice their best the server is
// saturated, and fewer, larger batches cost it less per operation, so the
// limit shrinks. It stays between min and max (the backend's floor and its
// connections). A queued operation waits for a slot while the round trips
// in flight are on time (onTime: twice the smoothed latency of their
// class); once it waited maxWait (twice the smoothed latency of a lone
// round trip) and one of them overran, a round trip starts for it over the
// limit: a slot held by an operation whose key keeps it waiting holds no
// one else up. A fixed one ([Coalescer.Unstick]) measures the same and
// keeps its limit.
//
// Not safe for concurrent use: the Coalescer calls it under its mutex.
type adaptive struct {
	limit  float64
	min    float64
	max    int
	smooth [latencyClasses]float64 // smoothed latency, seconds; 0 before the first sample
	best   [latencyClasses]float64 // best of the current window
	prev   [latencyClasses]float64 // best of the previous window
	window time.Time               // when the current window started
	fixed  bool                    // the limit stays (Coalescer.Unstick): only latency is measured
}

const (
	latencyClasses = 5
	bestWindow     = 5 * time.Second
	// below growBelow times their best latency the limit grows, above
	// shrinkAbove it shrinks.
	growBelow, shrinkAbove = 1.25, 2.0
)

func newAdaptive(floor, hardMax int) *adaptive {
	hardMax = max(hardMax, 1)
	floor = min(max(floor, 1), hardMax)
	return &adaptive{limit: float64(floor), min: float64(floor), max: hardMax}
}

// class returns the latency class of a round trip of n operations.
func class(n int) int {
	return min(latencyClasses-1, int(math.Log2(float64(max(n, 1)))))
}

// observe records that a round trip of n operations took d, and returns
// the limit.
func (a *adaptive) observe(n int, d time.Duration, now time.Time) int {
	k, x := class(n), d.Seconds()
	if now.Sub(a.window) > bestWindow {
		a.prev, a.best, a.window = a.best, [latencyClasses]float64{}, now
	}
	if a.best[k] == 0 || x < a.best[k] {
		a.best[k] = x
	}
	base := a.best[k]
	if a.prev[k] > 0 && a.prev[k] < base {
		base = a.prev[k]
	}
	if a.smooth[k] == 0 {
		a.smooth[k] = x
	} else {
		// A round trip that waited on a key's lock says nothing of the
		// server's load: at most 8 times the smoothed latency counts.
		a.smooth[k] = 0.8*a.smooth[k] + 0.2*math.Min(x, 8*a.smooth[k])
	}
	if a.fixed {
		return int(a.limit)
	}
	if r := a.smooth[k] / base; r < growBelow {
		a.limit = math.Min(float64(a.max), a.limit+1/a.limit)
	} else if r > shrinkAbove {
		a.limit = math.Max(a.min, a.limit-1/a.limit)
	}
	return int(a.limit)
}

// maxWait is how long a queued operation waits before the kick looks for
// a round trip in flight that overran (see Coalescer.kicked): twice the
// smoothed latency of a lone round trip (of the smallest class measured),
// between half a millisecond and 100 ms; 5 ms before any is measured.
func (a *adaptive) maxWait() time.Duration {
	for _, s := range a.smooth {
		if s > 0 {
			return min(max(time.Duration(2*s*float64(time.Second)), 500*time.Microsecond), 100*time.Millisecond)
		}
	}
	return 5 * time.Millisecond
}

// onTime is how long a round trip of n operations may take before it
// counts as overrun (see Coalescer.kicked): twice the smoothed latency of
// its class, between half a millisecond and a second; maxWait while its
// class has no measurement.
func (a *adaptive) onTime(n int) time.Duration {
	s := a.smooth[class(n)]
	if s == 0 {
		return a.maxWait()
	}
	return min(max(time.Duration(2*s*float64(time.Second)), 500*time.Microsecond), time.Second)
}
