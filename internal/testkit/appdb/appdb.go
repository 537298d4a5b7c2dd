// Package appdb makes the SQLite database of another application (a table
// of its own and a row in it, in SQLite's default rollback journal mode),
// for tests that check leasestore refuses such a file and leaves it as it
// was. Test scaffolding only. It opens the file through database/sql's
// "sqlite" driver, which the test binary registers by importing
// sqlstore/sqlite (modernc.org/sqlite): a neutral package imports no
// driver (internal/boundary).
package appdb

import (
	"database/sql"
	"os"
	"testing"
)

// Write makes the database at path and returns its bytes.
func Write(t testing.TB, path string) []byte {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'ann')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
