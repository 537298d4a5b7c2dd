package schedulertest

import (
	"sync"
	"time"
)

// latenessTick is how often a latenessProbe sleeps and wakes.
const latenessTick = 5 * time.Millisecond

// latenessProbe measures how late this process's timers fire: a goroutine
// sleeps latenessTick at a time and records by how much each wake-up
// overshot. A timing bound on the scheduler means nothing over a stretch
// in which a plain timer of the same process woke up later than the
// bound's margin: the machine, not the scheduler, was slow.
type latenessProbe struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	wakes  []time.Time     // when each wake-up happened
	misses []time.Duration // by how much it overshot latenessTick
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
				p.mu.Lock()
				p.wakes = append(p.wakes, now)
				p.misses = append(p.misses, now.Sub(at)-latenessTick)
				p.mu.Unlock()
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

// worst returns the largest overshoot of a wake-up in [from, to].
func (p *latenessProbe) worst(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var worst time.Duration
	for i, at := range p.wakes {
		if !at.Before(from) && !at.After(to) && p.misses[i] > worst {
			worst = p.misses[i]
		}
	}
	return worst
}
