package etcd

import "time"

// WithTestClock returns cfg (a new Config when nil) with now as the
// backend's clock: expiry is then judged by comparing the liveness entries'
// expiry with now in the transactions, instead of by etcd leases, so that
// the contract suite passes TTLs without sleeping.
func WithTestClock(cfg *Config, now func() time.Time) *Config {
	if cfg == nil {
		cfg = &Config{}
	}
	c := *cfg
	c.testNow = now
	return &c
}
