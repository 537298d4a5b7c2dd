package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// describe shows the lease and the key's latest audit records (only the
// latest --records of them, oldest first); a key with no live lease exits
// 4 with its history still shown; bad --records is invalid input.
func TestDescribe(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	if o := runCLI(t, e, "acquire", "k", "--owner", "w1", "-o", "token"); o.code != 0 {
		t.Fatalf("acquire: %+v", o)
	}
	for range 3 {
		if o := runCLI(t, e, "renew", "k", "--owner", "w1", "--token", "1"); o.code != 0 {
			t.Fatalf("renew: %+v", o)
		}
	}
	o := runCLI(t, e, "describe", "k", "--records", "2")
	if o.code != 0 || !strings.Contains(o.stdout, "owner     w1") || !strings.Contains(o.stdout, "latest 2 audit records") ||
		strings.Contains(o.stdout, "acquire  default") || strings.Count(o.stdout, "renew  default") != 2 {
		t.Fatalf("describe --records 2: want the lease and the last two renewals\n%+v", o)
	}
	j := runCLI(t, e, "describe", "k", "-o", "json").json(t)
	recs, _ := j["records"].([]any)
	if j["status"] != "found" || len(recs) != 4 || recs[0].(map[string]any)["op"] != "acquire" {
		t.Fatalf("describe -o json: %v", j)
	}
	if o := runCLI(t, e, "release", "k", "--owner", "w1", "--token", "1"); o.code != 0 {
		t.Fatalf("release: %+v", o)
	}
	o = runCLI(t, e, "describe", "k")
	if o.code != 4 || !strings.Contains(o.stdout, "not_found") || !strings.Contains(o.stdout, "release") {
		t.Fatalf("describe after release: want exit 4 and the history\n%+v", o)
	}
	if o := runCLI(t, e, "describe", "k", "--records", "0"); o.code != 2 || !strings.Contains(o.stderr, "--records") {
		t.Fatalf("describe --records 0: %+v", o)
	}
}

// list and audit --no-headers print data lines only; the next page's
// command goes to stderr.
func TestNoHeaders(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, k := range []string{"a", "b", "c"} {
		if o := runCLI(t, e, "acquire", k, "--owner", "w"); o.code != 0 {
			t.Fatalf("acquire: %+v", o)
		}
	}
	o := runCLI(t, e, "list")
	if !strings.HasPrefix(o.stdout, "NAMESPACE  KEY  OWNER  TOKEN  HELD FOR  TIME LEFT") {
		t.Fatalf("list: %q, want a header with HELD FOR", o.stdout)
	}
	o = runCLI(t, e, "list", "--no-headers", "--limit", "2")
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if o.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "default  a") || !strings.Contains(o.stderr, "more: leasectl list") {
		t.Fatalf("list --no-headers --limit 2: %+v", o)
	}
	o = runCLI(t, e, "audit", "--no-headers")
	lines = strings.Split(strings.TrimSpace(o.stdout), "\n")
	if o.code != 0 || len(lines) != 3 || strings.Contains(o.stdout, "OP") {
		t.Fatalf("audit --no-headers: %+v", o)
	}
}

// KEY arguments complete from the store's live leases in the namespace;
// completing where no SQLite store exists creates none.
func TestCompleteKeysFromTheStore(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, k := range []string{"scan/a", "scan/b", "default/other"} {
		if o := runCLI(t, e, "acquire", k, "--owner", "w"); o.code != 0 {
			t.Fatalf("acquire: %+v", o)
		}
	}
	o := runCLI(t, e, "__complete", "release", "scan/")
	if o.code != 0 || !strings.HasPrefix(o.stdout, "scan/a\nscan/b\n:4\n") {
		t.Fatalf("complete release scan/: %q", o.stdout)
	}
	if o := runCLI(t, e, "__complete", "get", "-n", "billing", ""); !strings.HasPrefix(o.stdout, ":4\n") {
		t.Fatalf("complete in an empty namespace: %q", o.stdout)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if o := runCLI(t, env{EnvDSN: "sqlite:" + missing}, "__complete", "get", ""); !strings.HasPrefix(o.stdout, ":4\n") {
		t.Fatalf("complete without a store: %q", o.stdout)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("completing created %s (%v)", missing, err)
	}
}

// namespaces lists the namespaces holding live leases (table: one a line;
// JSON: one object), and -n completes from them.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	if o := runCLI(t, e, "namespaces"); o.code != 0 || o.stdout != "no namespace holds a live lease\n" {
		t.Fatalf("namespaces of an empty store: %+v", o)
	}
	for _, ns := range []string{"scan", "billing", "scan-eu"} {
		if o := runCLI(t, e, "acquire", "k", "-n", ns, "--owner", "w"); o.code != 0 {
			t.Fatalf("acquire: %+v", o)
		}
	}
	if o := runCLI(t, e, "namespaces"); o.code != 0 || o.stdout != "billing\nscan\nscan-eu\n" {
		t.Fatalf("namespaces: %+v", o)
	}
	j := runCLI(t, e, "namespaces", "-o", "json").json(t)
	if got, _ := j["namespaces"].([]any); j["status"] != "found" || len(got) != 3 {
		t.Fatalf("namespaces -o json: %v", j)
	}
	if o := runCLI(t, e, "__complete", "list", "-n", "sc"); !strings.HasPrefix(o.stdout, "scan\nscan-eu\n:4\n") {
		t.Fatalf("complete -n sc: %q", o.stdout)
	}
	if o := runCLI(t, e, "__complete", "audit", "export", "-n", "b"); !strings.HasPrefix(o.stdout, "billing\n:4\n") {
		t.Fatalf("complete audit export -n b: %q", o.stdout)
	}
}

// list -A pages across every namespace with live leases, by namespace and
// key; its cursors resume across namespace boundaries; -A with -n and a
// cursor of another list are usage errors.
func TestListAllNamespaces(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, nk := range [][2]string{{"b", "k1"}, {"a", "k1"}, {"a", "k2"}, {"c", "k1"}, {"b", "k2"}} {
		if o := runCLI(t, e, "acquire", nk[1], "-n", nk[0], "--owner", "w"); o.code != 0 {
			t.Fatalf("acquire: %+v", o)
		}
	}
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		args := []string{"list", "-A", "--limit", "2", "-o", "json"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		j := runCLI(t, e, args...).json(t)
		leases, _ := j["leases"].([]any)
		for _, l := range leases {
			m := l.(map[string]any)
			got = append(got, m["namespace"].(string)+"/"+m["key"].(string))
		}
		cursor, _ = j["next_cursor"].(string)
		if cursor == "" || page > 5 {
			break
		}
	}
	if strings.Join(got, ",") != "a/k1,a/k2,b/k1,b/k2,c/k1" {
		t.Fatalf("list -A by pages of 2: %q", got)
	}
	o := runCLI(t, e, "list", "-A", "--no-headers")
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if o.code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[0], "a ") || !strings.HasPrefix(lines[4], "c ") {
		t.Fatalf("list -A table: %+v", o)
	}
	if o := runCLI(t, e, "list", "-A", "-n", "a"); o.code != 2 {
		t.Fatalf("list -A -n a: %+v", o)
	}
	if o := runCLI(t, e, "list", "-A", "--cursor", "c1.eA"); o.code != 2 || !strings.Contains(o.stderr, "not a cursor of list -A") {
		t.Fatalf("list -A with a list cursor: %+v", o)
	}
}

// get and describe of a key whose revoked lease's lock-delay keeps it
// exit 4 (no live lease) and show the ended lease and when the key is
// free, in text and JSON; a released lease leaves nothing to show.
func TestGetShowsTheLockDelay(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	if o := runCLI(t, e, "acquire", "k", "--owner", "w1", "--ttl", "1h", "--lock-delay", "1h"); o.code != 0 {
		t.Fatalf("acquire: %+v", o)
	}
	if o := runCLI(t, e, "revoke", "k", "--reason", "stuck"); o.code != 0 {
		t.Fatalf("revoke: %+v", o)
	}
	for _, cmd := range []string{"get", "describe"} {
		o := runCLI(t, e, cmd, "k")
		for _, want := range []string{"not_found default/k: no live lease; lock-delay until ", "(lease of w1, token 1, ended at ",
			"owner       w1", "lock-delay  1h (acquires answer conflict until "} {
			if o.code != 4 || !strings.Contains(o.stdout, want) {
				t.Errorf("%s during the lock-delay: want exit 4 and %q\n%+v", cmd, want, o)
			}
		}
		j := runCLI(t, e, cmd, "k", "-o", "json").json(t)
		l, _ := j["lease"].(map[string]any)
		if j["status"] != "not_found" || l == nil || l["owner"] != "w1" || l["token"] != 1.0 || l["lock_delay"] != "1h" ||
			!strings.Contains(j["message"].(string), "lock-delay until") {
			t.Errorf("%s -o json during the lock-delay: want not_found carrying the ended lease: %v", cmd, j)
		}
	}
	// acquire's conflict carries the same ended lease: shown as ended, not
	// as a live lease that "expired" and "would" keep the key.
	o := runCLI(t, e, "acquire", "k", "--owner", "w2")
	for _, want := range []string{"conflict default/k: ", "owner       w1", "(ended ", "lock-delay  1h (acquires answer conflict until "} {
		if o.code != 3 || !strings.Contains(o.stdout, want) {
			t.Errorf("acquire during the lock-delay: want exit 3 and %q\n%+v", want, o)
		}
	}
	if strings.Contains(o.stdout, "if it is revoked or runs out") || strings.Contains(o.stdout, "expired ") {
		t.Errorf("acquire during the lock-delay shows the ended lease as a live one:\n%s", o.stdout)
	}
	if o := runCLI(t, e, "acquire", "r", "--owner", "w1", "--ttl", "1h", "--lock-delay", "1h"); o.code != 0 {
		t.Fatalf("acquire: %+v", o)
	}
	if o := runCLI(t, e, "release", "r", "--owner", "w1", "--token", "2"); o.code != 0 {
		t.Fatalf("release: %+v", o)
	}
	if j := runCLI(t, e, "get", "r", "-o", "json").json(t); j["status"] != "not_found" || j["lease"] != nil {
		t.Errorf("get after a release: want not_found with a null lease: %v", j)
	}
}
