package etcd

import (
	"time"

	"google.golang.org/grpc"
)

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

// WithStampClock returns cfg (a new Config when nil) with now stamping
// leases and audit records, while etcd leases still judge expiry: a client
// whose clock is wrong.
func WithStampClock(cfg *Config, now func() time.Time) *Config {
	if cfg == nil {
		cfg = &Config{}
	}
	c := *cfg
	c.testStamps = now
	return &c
}

// SetAfterRead makes b's Follow call f between its catch-up read and the
// start of its watch (to compact the history there).
func SetAfterRead(b *Backend, f func()) { b.testAfterRead = f }

// SetFollowProgress makes b's followers ask for the watch's progress
// every d while their watch is quiet, instead of every followProgress.
func SetFollowProgress(b *Backend, d time.Duration) { b.testProgress = d }

// WithDialOptions returns cfg (a new Config when nil) with opts added to
// the gRPC options of the client Open creates (an interceptor that delays
// one kind of request: a slow cluster, as the client sees it).
func WithDialOptions(cfg *Config, opts ...grpc.DialOption) *Config {
	if cfg == nil {
		cfg = &Config{}
	}
	c := *cfg
	c.testDialOptions = append(c.testDialOptions[:len(c.testDialOptions):len(c.testDialOptions)], opts...)
	return &c
}
