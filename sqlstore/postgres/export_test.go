package postgres

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
