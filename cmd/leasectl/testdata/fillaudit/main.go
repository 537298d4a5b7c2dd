// Command fillaudit writes N made-up audit records of one namespace into a
// migrated SQLite store with one set-based statement: fillaudit PATH NS N.
// TestMain builds it without the race detector, because the same statement
// run by the race-instrumented test binary (SQLite's engine is Go code here)
// takes over a minute for the memory test's 100,000 records.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fillaudit:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: fillaudit PATH NAMESPACE N")
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || n < 1 {
		return fmt.Errorf("N: %q is not a positive count", args[2])
	}
	db, err := sqlite.OpenDB(args[0])
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(context.Background(), `
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
INSERT INTO leasestore_audit (at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
                              params_hash, expires_at, acquired_at, renewed_at)
SELECT ?2 + i, 'acquire', ?3, printf('key-%07d', i), 'worker-' || (i % 50), i,
       printf('%s-%07d', hex(randomblob(16)), i), 'worker-' || (i % 50), '', 'acquired', 1,
       hex(randomblob(32)), ?2 + i + 30000000, ?2 + i, ?2 + i
FROM n`, n, time.Now().UnixMicro(), args[1])
	return err
}
