package schedulertest

import (
	"sync"
	"time"
)

// timings is a log of how long things took, by when they ended. It is safe
// for concurrent use.
type timings struct {
	mu    sync.Mutex
	ended []time.Time
	took  []time.Duration
}

// add logs something that ended at ended after took.
func (l *timings) add(ended time.Time, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = append(l.ended, ended)
	l.took = append(l.took, took)
}

// worst returns the longest took of those that ended in [from, to].
func (l *timings) worst(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var worst time.Duration
	for i, at := range l.ended {
		if !at.Before(from) && !at.After(to) && l.took[i] > worst {
			worst = l.took[i]
		}
	}
	return worst
}

// latenessTick is how often a latenessProbe sleeps and wakes.
const latenessTick = 5 * time.Millisecond

// latenessProbe measures how late this process's timers fire: a goroutine
// sleeps latenessTick at a time and logs by how much each wake-up
// overshot. A timing bound on the scheduler means nothing over a stretch
// in which a plain timer of the same process woke up later than the
// bound's margin: the machine, not the scheduler, was slow.
type latenessProbe struct {
	timings // overshoots, by wake-up time
	stop    chan struct{}
	done    chan struct{}
}

// startLatenessProbe starts a probe; stop it with [latenessProbe.close].
func startLatenessProbe() *latenessProbe {
	p := &latenessProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		timer := time.NewTimer(latenessTick)
		defer timer.Stop()
		for at := time.Now(); ; {
			select {
			case <-p.stop:
				return
			case now := <-timer.C:
				p.add(now, now.Sub(at)-latenessTick)
				at = time.Now()
				timer.Reset(latenessTick)
			}
		}
	}()
	return p
}

// close stops the probe and waits for its goroutine.
func (p *latenessProbe) close() {
	close(p.stop)
	<-p.done
}
