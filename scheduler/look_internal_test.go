package scheduler

import (
	"testing"
	"time"
)

// nextLook wakes at the first expiry ahead, grouped with those shortly
// after it, and ignores expiries already past by the local clock (a store
// whose clock is behind must not make the worker spin).
func TestNextLook(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return now.Add(time.Duration(ms) * time.Millisecond) }
	group := 50 * time.Millisecond
	for _, c := range []struct {
		name     string
		expiries []time.Time
		want     time.Time
	}{
		{"none", nil, time.Time{}},
		{"all past", []time.Time{at(-10), now}, time.Time{}},
		{"one ahead", []time.Time{at(-10), at(300)}, at(300).Add(expiryMargin)},
		{"grouped", []time.Time{at(340), at(300), at(320), at(900)}, at(340).Add(expiryMargin)},
		{"group ends", []time.Time{at(300), at(351), at(350)}, at(350).Add(expiryMargin)},
	} {
		if got := nextLook(c.expiries, now, group); !got.Equal(c.want) {
			t.Errorf("%s: nextLook = %v, want %v", c.name, got, c.want)
		}
	}
}
