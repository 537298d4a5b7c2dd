package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
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
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if template.path != "" {
			_ = os.RemoveAll(filepath.Dir(template.path))
		}
	}))
}
