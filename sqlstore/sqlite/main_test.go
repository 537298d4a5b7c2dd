package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

func TestMain(m *testing.M) {
	if worker := os.Getenv(workerEnv); worker != "" {
		if worker == lincheckWorkerMode {
			os.Exit(runLincheckWorker())
		}
		if worker == fullDiskWorkerMode {
			os.Exit(runFullDiskWorker())
		}
		if worker == noFileWorkerMode {
			os.Exit(runNoFileWorker())
		}
		if worker == tokensWorkerMode {
			os.Exit(runTokensWorker())
		}
		if worker == releaseWorkerMode {
			os.Exit(runReleaseWorker())
		}
		os.Exit(runWorker(worker))
	}
	// A cleanup given to goleak must exit itself with the code it is
	// given: returning makes TestMain exit with the tests' code, and a
	// leak would fail nothing.
	goleak.VerifyTestMain(closingKeepers{m}, goleak.Cleanup(func(code int) {
		if template.path != "" {
			_ = os.RemoveAll(filepath.Dir(template.path))
		}
		os.Exit(code)
	}))
}

// closingKeepers runs the tests, then closes the keepers of replaced files
// that their Backends left open by design (sqlite.CloseLeftKeepers), so
// that goleak finds only goroutines that outlived their tests by mistake.
type closingKeepers struct{ m *testing.M }

func (c closingKeepers) Run() int {
	code := c.m.Run()
	sqlite.CloseLeftKeepers()
	return code
}
