package cli

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// A PostgreSQL role the server lets in without the privileges a command
// needs on the store's objects (SQLSTATE 42501, or a write privilege
// Health finds missing) is refused for its permission, not by an outage:
// exit 7, status forbidden, naming the GRANT, as for a served store's 403
// (DESIGN.md: a bad credential is not an outage). It exited 5.
func TestPostgresRoleWithoutPrivilegesExits7(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	reader := pgtest.GrantedRoleDSN(t, dsn, "SELECT ON ALL TABLES IN SCHEMA %s")
	e := env{EnvDSN: reader}
	wantCode(t, runCLI(t, e, "get", "k"), ExitRefused) // let in: its reads serve
	for _, args := range [][]string{
		{"acquire", "k", "--owner", "w"},
		{"health"},
	} {
		o := runCLI(t, e, append(args, "-o", "json")...)
		wantCode(t, o, ExitAuth)
		if m := o.json(t); m["status"] != StatusForbidden || !strings.Contains(m["message"].(string), "GRANT") {
			t.Errorf("%v by a role that may only read: %v, want status forbidden naming the GRANT", args, m)
		}
		o = runCLI(t, e, args...)
		wantCode(t, o, ExitAuth)
		if !strings.Contains(o.stderr, "forbidden") || !strings.Contains(o.stderr, "GRANT") {
			t.Errorf("%v by a role that may only read: stderr %q, want forbidden naming the GRANT", args, o.stderr)
		}
	}
}
