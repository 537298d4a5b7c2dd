package proccpu_test

import (
	"os"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/proccpu"
)

// CPU this process burns shows in /proc as in getrusage; a process that
// does not exist reads -1.
func TestReadsThisProcess(t *testing.T) {
	self0, proc0 := proccpu.Self(), proccpu.Of(os.Getpid())
	if proc0 < 0 {
		t.Skip("no /proc on this system")
	}
	// Burn 200 ms of CPU, however long the machine takes to give it.
	for deadline := time.Now().Add(30 * time.Second); proccpu.Self()-self0 < 200*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("Self grew by only %v in 30 s of a busy loop", proccpu.Self()-self0)
		}
	}
	// /proc counts in 10 ms ticks, and a little later than getrusage.
	if d := proccpu.Of(os.Getpid()) - proc0; d < 100*time.Millisecond {
		t.Errorf("Of(this process) grew by %v while it burned 200 ms", d)
	}
	if got := proccpu.Of(1 << 30); got != -1 {
		t.Errorf("Of(no such process) = %v, want -1", got)
	}
}
