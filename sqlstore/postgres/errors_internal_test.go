package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/protocol"
)

func TestInterpretError(t *testing.T) {
	t.Parallel()
	pg := func(code, constraint string) error {
		return fmt.Errorf("query: %w", &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m", ConstraintName: constraint})
	}
	for _, tc := range []struct {
		name     string
		err      error
		status   protocol.Status
		contains string
	}{
		{"admin shutdown", pg("57P01", ""), protocol.StatusUnavailable, "dropped the connection"},
		{"crash shutdown", pg("57P02", ""), protocol.StatusUnavailable, "dropped the connection"},
		{"cannot connect now", pg("57P03", ""), protocol.StatusUnavailable, "dropped the connection"},
		{"connection failure", pg("08006", ""), protocol.StatusUnavailable, "dropped the connection"},
		{"too many connections", pg("53300", ""), protocol.StatusUnavailable, "raise the server's max_connections"},
		{"disk full", pg("53100", ""), protocol.StatusUnavailable, "the server's disk is full"},
		{"out of memory", pg("53200", ""), protocol.StatusUnavailable, "the server is out of memory"},
		{"configuration limit exceeded", pg("53400", ""), protocol.StatusUnavailable, "a limit of its configuration"},
		{"insufficient resources", pg("53000", ""), protocol.StatusUnavailable, "dropped the connection"},
		{"undefined table", pg("42P01", ""), protocol.StatusUnavailable, "leasectl migrate up"},
		{"no schema", pg("3F000", ""), protocol.StatusUnavailable, "leasectl migrate up"},
		{"query canceled by another session", &pgconn.PgError{Code: "57014", Message: "canceling statement due to user request"},
			protocol.StatusUnavailable, "the server cancelled the statement"},
		{"statement timeout", &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"},
			protocol.StatusTimeout, "statement_timeout"},
		{"lock timeout", pg("55P03", ""), protocol.StatusTimeout, "cancelled"},
		{"other unique violation", pg("23505", "other"), protocol.StatusUnavailable, "SQLSTATE 23505"},
		{"no privilege on the sequence", &pgconn.PgError{Code: "42501", Message: "permission denied for sequence leasestore_fencing_seq"},
			protocol.StatusUnavailable, "run GRANT USAGE, UPDATE ON SEQUENCE leasestore_fencing_seq TO it"},
		{"no privilege on a table", &pgconn.PgError{Code: "42501", Message: "permission denied for table leasestore_audit"},
			protocol.StatusUnavailable, "run GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE leasestore_audit TO it"},
		{"no privilege on a store function", &pgconn.PgError{Code: "42501", Message: "permission denied for function leasestore_outcome"},
			protocol.StatusUnavailable, "run GRANT EXECUTE ON FUNCTION leasestore_outcome(text, text, text), " +
				"leasestore_outcome_fresh(text, text, text), leasestore_audit_went_back(), leasestore_audit_new_era(), " +
				"leasestore_audit_pruned_through(text), leasestore_audit_pruned_mark(text) TO it"},
		{"no privilege on a function named like a store function", &pgconn.PgError{Code: "42501",
			Message: "permission denied for function leasestore_outcome_x"}, protocol.StatusUnavailable, "lacks a privilege: grant it those docs"},
		{"no privilege on something else", &pgconn.PgError{Code: "42501", Message: "permission denied for function f"},
			protocol.StatusUnavailable, "docs/postgres-settings.md#privileges"},
		{"append-only refusal", &pgconn.PgError{Code: "42501", Message: "leasestore_audit is append-only: DELETE refused"},
			protocol.StatusUnavailable, "the server refused the statement"},
		{"anything else", pg("XX000", ""), protocol.StatusUnavailable, "SQLSTATE XX000"},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), protocol.StatusTimeout, "deadline"},
		{"cancelled", context.Canceled, protocol.StatusTimeout, "deadline"},
		{"lost connection", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), protocol.StatusUnavailable, "connection was lost"},
		{"unknown", errors.New("boom"), protocol.StatusUnavailable, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := interpretError(protocol.OpAcquire, tc.err)
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				t.Fatalf("%T %v is not a *protocol.Error", err, err)
			}
			if pe.Status != tc.status || pe.Op != protocol.OpAcquire {
				t.Fatalf("status %q op %q, want %q acquire", pe.Status, pe.Op, tc.status)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("%v does not wrap its cause", err)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("%q does not mention %q", err, tc.contains)
			}
		})
	}
	if err := interpretError(protocol.OpRenew, pg("23505", requestConstraint)); !errors.Is(err, errRequestIDRace) {
		t.Fatalf("a request id violation gave %v, want errRequestIDRace", err)
	}
	if interpretError(protocol.OpGet, nil) != nil {
		t.Fatal("nil error interpreted")
	}
}

func TestDSNPassword(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://u:pw@h:5432/db":                "pw",
		"postgresql://u:p%40w@h/db?x=y":            "p%40w",
		"postgres://u@h/db":                        "",
		"postgres://h/db":                          "",
		"host=h user=u password=secret dbname=d":   "secret",
		"host=h user=u password='secret' dbname=d": "secret",
		"host=h user=u":                            "",
	} {
		if got := dsnPassword(dsn); got != want {
			t.Errorf("dsnPassword(%q) = %q, want %q", dsn, got, want)
		}
	}
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial u:hunter2@h failed")
	err := redacted(backendkit.NewError("", protocol.StatusUnavailable, cause, "open with hunter2"), "hunter2")
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("%q shows the secret", err)
	}
	if protocol.StatusOf(err) != protocol.StatusUnavailable || !errors.Is(err, cause) {
		t.Fatalf("%v lost its status or cause", err)
	}
	plain := redacted(cause, "hunter2")
	if strings.Contains(plain.Error(), "hunter2") || !errors.Is(plain, cause) {
		t.Fatalf("%v", plain)
	}
	// A very short password would mangle ordinary words: it is left alone.
	short := errors.New("failed to connect to `user=root database=test`")
	if got := redacted(short, "ab"); got.Error() != short.Error() {
		t.Fatalf("a 2-byte password rewrote the error: %q", got)
	}
}
