package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/protocol"
)

// A server that refuses the connection (the DSN's database does not
// exist, or the role may not log in) is unavailable, with a message that
// says the connection was refused and names the fix. It was "the server
// refused the statement".
func TestInterpretRefusedConnection(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]string{
		"3D000": "check the database name in the DSN, or create the database",
		"28000": "check the DSN's role",
		"28P01": "password",
	} {
		err := interpretError("", fmt.Errorf("failed to connect: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"}))
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Status != protocol.StatusUnavailable {
			t.Fatalf("%s: %v, want unavailable", code, err)
		}
		if !strings.Contains(pe.Message, "refused the connection") || !strings.Contains(pe.Message, want) {
			t.Errorf("%s: message %q, want the connection refused and %q", code, pe.Message, want)
		}
	}
}
