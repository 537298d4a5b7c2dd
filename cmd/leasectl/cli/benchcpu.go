package cli

import (
	"github.com/leasestore/leasestore/internal/proccpu"

	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// CPU accounting of bench on PostgreSQL: when the server runs on this host
// (its processes are readable in /proc), bench reports the CPU time the
// server processes serving a subject's pool spent per operation, and this
// process's own. On a machine shared with other work, throughput depends on
// how the kernel shares the CPUs out (more server processes get more
// turns), while CPU time per operation is the cost itself.

// cpuMeter finds a subject's server processes by application_name.
type cpuMeter struct {
	dsn string
	app string
}

// pids returns the server processes of the subject's pool, nil when they
// cannot be read.
func (m *cpuMeter) pids(ctx context.Context) []int {
	if m == nil {
		return nil
	}
	conn, err := pgx.Connect(ctx, m.dsn)
	if err != nil {
		return nil
	}
	defer func() { _ = conn.Close(context.Background()) }()
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, m.app)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out
}

// cpuSample is the CPU time of a subject's server processes at one moment.
type cpuSample map[int]time.Duration

func (m *cpuMeter) sample(ctx context.Context) cpuSample {
	pids := m.pids(ctx)
	if pids == nil {
		return nil
	}
	s := cpuSample{}
	for _, p := range pids {
		c := proccpu.Of(p)
		if c < 0 {
			return nil
		}
		s[p] = c
	}
	return s
}

// since returns the server CPU spent from s0 to s1 (processes that appeared
// meanwhile count whole), or -1 when either sample is missing.
func (s1 cpuSample) since(s0 cpuSample) time.Duration {
	if s0 == nil || s1 == nil {
		return -1
	}
	var d time.Duration
	for p, c := range s1 {
		d += c - s0[p]
	}
	return d
}
