package pgtest

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, LeakOptions()...)
}

func TestWithSearchPath(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u@h:5432/db?sslmode=disable",
			"postgres://u@h:5432/db?options=-c%20search_path%3Ds1&sslmode=disable"},
		{"postgresql://u:p%40ss@h/db?options=-c%20statement_timeout%3D5s",
			"postgresql://u:p%40ss@h/db?options=-c%20statement_timeout%3D5s%20-c%20search_path%3Ds1"},
		{"host=h user=u dbname=db", "host=h user=u dbname=db options='-c search_path=s1'"},
	} {
		got, err := WithSearchPath(tc.dsn, "s1")
		if err != nil || got != tc.want {
			t.Errorf("WithSearchPath(%q) = %q, %v; want %q", tc.dsn, got, err, tc.want)
		}
	}
	for _, bad := range []struct{ dsn, schema string }{
		{"postgres://h/db", "Bad-Name"},
		{"postgres://h/db", "a;b"},
		{"host=h options='-c x=1'", "s1"},
	} {
		if got, err := WithSearchPath(bad.dsn, bad.schema); err == nil {
			t.Errorf("WithSearchPath(%q, %q) = %q, want an error", bad.dsn, bad.schema, got)
		}
	}
}

// TestDSNIsolatesSchemas checks, against a real server, that two DSNs from
// DSN name different, existing, empty schemas that their connections use.
func TestDSNIsolatesSchemas(t *testing.T) {
	a, b := DSN(t), DSN(t)
	sa, sb := currentSchema(t, a), currentSchema(t, b)
	if sa == sb || sa == "" || sa == "public" {
		t.Fatalf("schemas %q and %q, want two fresh ones", sa, sb)
	}
}

func currentSchema(t *testing.T, dsn string) string {
	t.Helper()
	var s string
	if err := query(t, dsn, "SELECT coalesce(current_schema(), '')", &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSchemasOutliveATerminatedAdminConnection: when the server ends the
// connection through which schemas are made (as a test that terminates
// sessions could), the next schema is made on a new one.
func TestSchemasOutliveATerminatedAdminConnection(t *testing.T) {
	DSN(t)
	admin.mu.Lock()
	pid := admin.conn.PgConn().PID()
	admin.mu.Unlock()
	var ended bool
	if err := query(t, ServerDSN(t), fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid), &ended); err != nil || !ended {
		t.Fatalf("terminate the admin connection: %v, %v", ended, err)
	}
	if s := currentSchema(t, DSN(t)); s == "" || s == "public" {
		t.Fatalf("schema %q after the admin connection was terminated, want a fresh one", s)
	}
}

// Namespace hands out valid namespaces, a different one each call.
func TestNamespaceIsValidAndNew(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		ns := Namespace()
		if err := (protocol.Key{Namespace: ns, Name: "k"}).Validate(); err != nil {
			t.Fatalf("namespace %q is not valid: %v", ns, err)
		}
		if seen[ns] {
			t.Fatalf("namespace %q handed out twice", ns)
		}
		seen[ns] = true
	}
}
