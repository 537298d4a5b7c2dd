package httpapi_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// A SQLite backend whose file was put back under it leaves its keeper
	// (a *sql.DB holding the replaced file's lock) open until the process
	// exits, by design (sqlstore/sqlite identity.go: closing it could
	// checkpoint the removed log over the file); TestRestartRequiredCrossesHTTP
	// serves such a backend.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}
