package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// TestAuditTableAndConflictQuoteOwnersAndActors: audit's table and the
// conflict message ("held by OWNER with token N") showed an owner or an
// actor holding a blank as it is, so "worker 1" read as two columns (or
// two words of the message), and one holding a newline broke the row in
// two. They must show them as list and get do (lineValue).
func TestAuditTableAndConflictQuoteOwnersAndActors(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "worker 1"), 0)
	conflict := runCLI(t, e, "acquire", "k", "--owner", "w2")
	if out := conflict.stdout + conflict.stderr; !strings.Contains(out, `held by "worker 1" with token`) {
		t.Errorf(`acquire of a key held by "worker 1": want the message to say held by "worker 1" with token ...; got\n%s`, out)
	}
	wantCode(t, runCLI(t, e, "revoke", "k", "--reason", "r", "--actor", "ops team"), 0)
	tbl := runCLI(t, e, "audit", "-n", "default", "--key", "k", "--no-headers")
	wantCode(t, tbl, 0)
	acquired := regexp.MustCompile(`(?m)^\d+\s+\S+\s+acquire\s+default\s+k\s+"worker 1"\s+\d+\s`)
	revoked := regexp.MustCompile(`(?m)^\d+\s+\S+\s+revoke\s+default\s+k\s+"worker 1"\s+\d+\s+"ops team"\s+revoked\s`)
	if !acquired.MatchString(tbl.stdout) || !revoked.MatchString(tbl.stdout) {
		t.Errorf(`audit table: want the owner "worker 1" and the actor "ops team" quoted in their columns; got\n%s`, tbl.stdout)
	}

	// Owners and actors with a control character cannot be written
	// through leasectl; a store that holds one (written by another
	// release, or another client of an etcd prefix) still gets one row.
	rec := audit.Record{ID: 1, At: time.Unix(0, 0), Op: protocol.OpRevoke, Namespace: "ns", Key: "k",
		Owner: "a\nb", Token: 1, Actor: "c\td", Status: protocol.StatusRevoked, Reason: "r"}
	out := formatRecords([]audit.Record{rec}, true)
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `"a\nb"`) || !strings.Contains(out, `"c\td"`) {
		t.Errorf("audit table of a record with owner %q and actor %q: want one row showing them quoted; got\n%s", rec.Owner, rec.Actor, out)
	}
}

// TestNotOwnerMessagesQuoteTheOwner: the not_owner messages name the
// holder and the caller quoted as list shows an owner.
func TestNotOwnerMessagesQuoteTheOwner(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := &protocol.Lease{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "worker 1", Token: 7,
		ExpiresAt: now.Add(time.Hour)}
	for _, tc := range []struct {
		owner string
		token int64
		lease *protocol.Lease
	}{
		{"me too", 7, l}, {"me too", 9, l}, {"me too", 9, &protocol.Lease{Key: l.Key, Owner: l.Owner, Token: 7, ExpiresAt: now.Add(-time.Hour)}},
		{"me too", 7, &protocol.Lease{Key: l.Key, Owner: l.Owner, Token: 7, ExpiresAt: now.Add(-time.Hour)}},
	} {
		res := explainNotOwner(protocol.Result{Status: protocol.StatusNotOwner, Lease: tc.lease}, tc.owner, tc.token, now)
		if !strings.Contains(res.Message, `"worker 1"`) || strings.Contains(res.Message, "by me too") || strings.Contains(res.Message, "me too's") {
			t.Errorf("not_owner, token %d asked as %q: %q; want the holder and the caller quoted", tc.token, tc.owner, res.Message)
		}
	}
}
