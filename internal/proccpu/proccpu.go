// Package proccpu reads how much CPU time processes of this host have used:
// another process's from /proc (Linux), this process's from getrusage
// (Unix; 0 elsewhere).
// leasectl bench and the PostgreSQL benchmarks use it to report the CPU a
// database server's processes spent per operation. Its functions hold no
// state and are safe for concurrent use.
package proccpu

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// tick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const tick = 10 * time.Millisecond

// Of returns the CPU time (user and system) process pid has used, or -1
// when /proc does not show it (the process runs on another host, or ended).
func Of(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command name, which is in parentheses.
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
