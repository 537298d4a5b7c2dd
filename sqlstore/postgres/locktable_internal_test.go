package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/protocol"
)

// TestLockTableFullIsNotCalledOutOfMemory shows that a server whose shared
// lock table is full (PostgreSQL's lock.c answers SQLSTATE 53200, "out of
// shared memory", HINT "You might need to increase
// max_locks_per_transaction") is told to lower its memory settings
// (work_mem, shared_buffers): the opposite of the fix, which the hint
// names and the error drops (pgconn.PgError's text carries no hint).
// interpretError's comment places max_locks_per_transaction under 53400,
// which the server never answers for it. The error is built here, as in
// TestInterpretError: filling the lock table of the shared test server
// would fail the other sessions of the cluster.
func TestLockTableFullIsNotCalledOutOfMemory(t *testing.T) {
	t.Parallel()
	cause := &pgconn.PgError{Severity: "ERROR", Code: "53200", Message: "out of shared memory",
		Hint: "You might need to increase max_locks_per_transaction."}
	err := interpretError(protocol.OpAcquire, fmt.Errorf("query: %w", cause))
	msg := err.Error()
	t.Logf("lock table full: %v", msg)
	if !strings.Contains(msg, "max_locks_per_transaction") {
		t.Errorf("the error %q of a full lock table does not name max_locks_per_transaction, the setting to raise", msg)
	}
	if strings.Contains(msg, "lower its memory settings") {
		t.Errorf("the error %q of a full lock table tells the operator to lower shared_buffers and work_mem", msg)
	}
}
