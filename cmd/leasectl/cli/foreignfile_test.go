package cli

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/appdb"
)

// leasectl creates and migrates a SQLite store on first use: a new or
// empty file. A --dsn naming the database of another application (a
// mistyped path, the service's own database) is no first use: a lease
// command refuses it, naming the tables it found and `leasectl migrate up`
// for an operator who does want leasestore's tables in it, and leaves the
// file byte for byte as it was. leasectl switched the file to WAL and
// added leasestore's tables, triggers and version table to it, silently.
func TestFirstUseLeavesAnotherApplicationsDatabaseAlone(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	before := appdb.Write(t, path)
	e := env{EnvDSN: "sqlite:" + path}
	for _, args := range [][]string{{"acquire", "k", "--owner", "w"}, {"get", "k"}, {"list"}, {"health"}} {
		o := runCLI(t, e, args...)
		if o.code != ExitUnavailable || !strings.Contains(o.stderr, "users") ||
			!strings.Contains(o.stderr, "leasectl migrate up --dsn sqlite:"+path) {
			t.Errorf("%v on another application's database: exit %d, want %d naming its table (users) and "+
				"`leasectl migrate up --dsn sqlite:%s`\nstdout: %s\nstderr: %s", args, o.code, ExitUnavailable, path, o.stdout, o.stderr)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Fatalf("%v on another application's database changed it: %d bytes before, %d after; want it untouched",
				args, len(before), len(after))
		}
	}
	// The fix the refusal names works, and keeps the application's table.
	wantCode(t, runCLI(t, e, "migrate", "up"), ExitOK)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), ExitOK)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name string
	if err := db.QueryRow(`SELECT name FROM users WHERE id = 1`).Scan(&name); err != nil || name != "ann" {
		t.Fatalf("the application's row after migrate up: %q, %v; want ann", name, err)
	}
}
