package sqlite_test

// workerEnv selects a worker mode when the test binary re-executes itself.
const workerEnv = "LEASESTORE_SQLITE_TEST_WORKER"

func runWorker(string) int { return 2 }
