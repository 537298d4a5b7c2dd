package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// `leasectl help TOPIC` with a topic that is no command is a usage error
// (exit 2, on stderr), as `leasectl TOPIC` and `leasectl completion tcsh`
// are: not help on stdout with exit 0, which a script takes for success.
func TestHelpUnknownTopicIsAUsageError(t *testing.T) {
	t.Parallel()
	o := runCLI(t, env{}, "help", "bogus")
	if o.code != ExitUsage {
		first, _, _ := strings.Cut(o.stdout, "\n")
		t.Errorf("leasectl help bogus exited %d, want %d (usage); stdout begins %q", o.code, ExitUsage, first)
	}
	if strings.Contains(o.stdout, "bogus") || !strings.Contains(o.stderr, "bogus") {
		first, _, _ := strings.Cut(o.stdout, "\n")
		t.Errorf("leasectl help bogus: the refusal should be on stderr, naming the topic; stdout begins %q, stderr %q", first, o.stderr)
	}
	wantCode(t, runCLI(t, env{}, "bogus"), ExitUsage)
}

// A reused request id's refusal names the earlier request's key as every
// surface prints a key (NS/NAME, DESIGN.md contract v3: "Every printed key
// uses the form (results, ... messages)"), so that it reads back as that
// key: "q/k" in namespace "p" printed bare reads back as the name k in
// namespace q, another key.
func TestReusedRequestIDMessageNamesTheKeyInThePrintedForm(t *testing.T) {
	t.Parallel()
	for name, mk := range sqlEnvs() {
		t.Run(name, func(t *testing.T) {
			e := mk(t)
			wantCode(t, runCLI(t, e, "acquire", "p/q/k", "--owner", "a", "--request-id", "rid-reused", "-o", "json"), ExitOK)
			o := runCLI(t, e, "acquire", "p/other", "--owner", "a", "--request-id", "rid-reused", "-o", "json")
			wantCode(t, o, ExitUsage)
			msg, _ := o.json(t)["message"].(string)
			want := protocol.Key{Namespace: "p", Name: "q/k"}.String()
			if !strings.Contains(msg, want) {
				t.Errorf("the reused request id's message does not name the earlier key as %q (how leasectl prints it, and reads it back): %q", want, msg)
			}
		})
	}
}

// watch --op renew --no-renewals asks for renewals only and for none: a
// watch that can never print anything. Conflicting flags are a usage error
// (exit 2, naming both), as -A with -n, --order newest with --follow and
// --wait-timeout without --wait are, not a watch that runs silently until
// interrupted and then exits 0.
func TestWatchOpRenewWithNoRenewalsIsAUsageError(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	o := runCLIFor(t, time.Second, e, "watch", "--op", "renew", "--no-renewals", "-o", "json")
	if o.code != ExitUsage || !strings.Contains(o.stdout, "--no-renewals") {
		t.Errorf("watch --op renew --no-renewals exited %d, stdout %q: want %d, a message naming --no-renewals",
			o.code, o.stdout, ExitUsage)
	}
}

// audit --follow with a cursor of a newest-first page is refused (exit 2),
// as watch and audit export refuse it: before the store is opened, so the
// embedded SQLite store is not created (DESIGN.md: bad input is refused
// before leasectl opens the store and never creates or touches one). It was
// refused only after opening, creating and migrating the file.
func TestFollowNewestCursorRefusedBeforeTheStoreIsCreated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "leases.db")
	e := env{EnvDSN: "sqlite:" + path}
	o := runCLIFor(t, 5*time.Second, e, "audit", "--follow", "--cursor", "a1n.3", "-o", "json")
	wantCode(t, o, ExitUsage)
	if _, err := os.Stat(path); err == nil {
		t.Errorf("audit --follow --cursor a1n.3 was refused (%s) but created the store %s", strings.TrimSpace(o.stdout), path)
	}
}
