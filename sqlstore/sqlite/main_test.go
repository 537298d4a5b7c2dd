package sqlite_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if worker := os.Getenv(workerEnv); worker != "" {
		if worker == lincheckWorkerMode {
			os.Exit(runLincheckWorker())
		}
		if worker == releaseWorkerMode {
			os.Exit(runReleaseWorker())
		}
		os.Exit(runWorker(worker))
	}
	goleak.VerifyTestMain(m)
}
