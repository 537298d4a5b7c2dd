package sqlite

import "time"

// WithTestClock returns cfg (a new Config when nil) with now as the
// backend's clock. It exists only in this package's test binary.
func WithTestClock(cfg *Config, now func() time.Time) *Config {
	if cfg == nil {
		cfg = &Config{}
	}
	cfg.testNow = now
	return cfg
}

// SetPruneBatch sets how many records one prune transaction removes, until
// the test ends.
func SetPruneBatch(t interface{ Cleanup(func()) }, n int64) {
	old := pruneBatch
	pruneBatch = n
	t.Cleanup(func() { pruneBatch = old })
}
