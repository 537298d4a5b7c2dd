package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A DSN with a mistyped scheme is invalid input (exit 2, one JSON object,
// no file made), and the message names the DSN to write instead, not the
// mistyped one behind sqlite: (sqlite:sqlit:/tmp/x.db, a file under a
// directory named "sqlit:"). sqlite://NAME, the URL habit, would be the
// file /NAME at the root of the file system: refused, naming sqlite:NAME.
func TestMistypedDSNNamesTheFix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Base(filepath.Dir(dir)) + ".db" // the test's own temporary directory's name: no one else's under /
	t.Cleanup(func() {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			_ = os.Remove("/" + root + suffix)
		}
	})
	c := leasectl{dir: dir}
	for _, tc := range []struct {
		dsn  string
		want string // the message names this
	}{
		{"sqlit:/var/lib/leases.db", "sqlite:/var/lib/leases.db"},
		{"sqllite:leases.db", "sqlite:leases.db"},
		{"SQLITE:leases.db", "sqlite:leases.db"},
		{"sqlite3:data/leases.db", "sqlite:data/leases.db"},
		{"postgres:/127.0.0.1/test", "postgres://"},
		{"sqlite://" + root, "sqlite:" + root},
	} {
		r := c.run(t, "health", "--dsn", tc.dsn, "-o", "json")
		if r.code != 2 {
			t.Errorf("--dsn %s: exit %d, want 2\n%s", tc.dsn, r.code, r)
			continue
		}
		m := r.obj(t)
		msg, _ := m["message"].(string)
		if m["status"] != "invalid" || !strings.Contains(msg, tc.want) || strings.Contains(msg, "sqlite:"+tc.dsn) {
			t.Errorf("--dsn %s: %v, want status invalid and a message naming %s (not sqlite:%s)", tc.dsn, m, tc.want, tc.dsn)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("mistyped DSNs left %v in the working directory", entries)
	}
	if _, err := os.Stat("/" + root); err == nil {
		t.Errorf("--dsn sqlite://%s made the file /%s", root, root)
	}
}

// A bad DSN that came from $LEASESTORE_DSN, not --dsn, says so: the
// operator who typed no DSN learns where to fix it.
func TestBadDSNFromTheEnvironmentNamesIt(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: "postgress://db/leases"}
	for _, args := range [][]string{{"health"}, {"migrate", "up"}, {"serve"}, {"bench", "--duration", "1s"}} {
		r := c.run(t, append(args, "-o", "json")...)
		if r.code != 2 {
			t.Errorf("exit %d, want 2\n%s", r.code, r)
			continue
		}
		if msg, _ := r.obj(t)["message"].(string); !strings.Contains(msg, "$LEASESTORE_DSN") {
			t.Errorf("%v with a bad $LEASESTORE_DSN: message %q does not name $LEASESTORE_DSN", args, msg)
		}
	}
}
