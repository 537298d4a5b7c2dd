package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// procCPU returns the CPU time (user and system) process pid has used, or
// -1 when /proc does not show it.
func procCPU(pid int) time.Duration {
	const tick = 10 * time.Millisecond // USER_HZ
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(u+s) * tick
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
		c := procCPU(p)
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
