package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasestore/leasestore/internal/testkit/etcdcluster"
	"github.com/leasestore/leasestore/internal/testkit/testca"
)

// etcdDSN returns the DSN of a fresh prefix of the test binary's etcd
// cluster (3 member processes, started on first use).
func etcdDSN(t *testing.T) string {
	c := etcdcluster.Shared(t)
	return c.DSN(c.Prefix(t))
}

// TestEtcd: every lease command against an etcd DSN.
func TestEtcd(t *testing.T) {
	t.Parallel()
	exercise(t, leasectl{dir: t.TempDir(), dsn: etcdDSN(t)}, "etcd")
}

// TestServeExerciseEtcd: leasectl serve serves an etcd store.
func TestServeExerciseEtcd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, etcdDSN(t), nil)
	exercise(t, leasectl{dir: dir, dsn: s.url}, "http")
}

// TestEtcdOperatorCommands: migrate (status, up, down), describe,
// namespaces, gc, audit export, audit prune and fencing raise (refused) on
// an etcd DSN.
func TestEtcdOperatorCommands(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: etcdDSN(t)}
	st := c.runJSON(t, 0, "migrate", "status")
	if st["dialect"] != "etcd" || st["version"] != float64(0) || st["latest"] != float64(1) {
		t.Fatalf("migrate status of a fresh prefix: %v", st)
	}
	up := c.runJSON(t, 0, "migrate", "up")
	if up["version"] != float64(1) || len(up["migrations"].([]any)) != 1 {
		t.Fatalf("migrate up of a fresh prefix: %v, want the format version recorded", up)
	}
	if again := c.runJSON(t, 0, "migrate", "up"); again["version"] != float64(1) || len(again["migrations"].([]any)) != 0 {
		t.Fatalf("migrate up again: %v, want nothing applied", again)
	}
	if st := c.runJSON(t, 0, "migrate", "status"); st["version"] != float64(1) {
		t.Fatalf("migrate status after up: %v", st)
	}

	l := result(t, c.runJSON(t, 0, "acquire", "k", "-n", "ops", "--owner", "w1"), "acquired")
	c.runJSON(t, 0, "acquire", "short", "-n", "ops", "--owner", "w1", "--ttl", "1s")
	d := c.runJSON(t, 0, "describe", "k", "-n", "ops")
	if d["status"] != "found" || len(d["records"].([]any)) != 1 || tok(d["lease"].(map[string]any)) != tok(l) {
		t.Fatalf("describe: %v", d)
	}
	ns := c.runJSON(t, 0, "namespaces")
	if got := ns["namespaces"].([]any); len(got) != 1 || got[0] != "ops" {
		t.Fatalf("namespaces: %v", ns)
	}
	// The 1s lease ends when the cluster's etcd lease does; then gc
	// removes its entries.
	for deadline := time.Now().Add(15 * time.Second); c.run(t, "get", "short", "-n", "ops").code != 4; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the 1s lease did not end within 15s")
		}
	}
	if gc := c.runJSON(t, 0, "gc", "--grace", "0s"); gc["removed"] != float64(1) {
		t.Fatalf("gc: %v, want the expired lease removed", gc)
	}
	// audit filters and newest-first pages on etcd: the acquires of w1,
	// newest first, one a page.
	keyOf := func(page map[string]any) string {
		t.Helper()
		recs := page["records"].([]any)
		if len(recs) != 1 {
			t.Fatalf("audit page: %v, want one record", page)
		}
		return recs[0].(map[string]any)["key"].(string)
	}
	first := c.runJSON(t, 0, "audit", "-n", "ops", "--op", "acquire", "--owner", "w1", "--limit", "1")
	second := c.runJSON(t, 0, "audit", "-n", "ops", "--op", "acquire", "--owner", "w1", "--limit", "1", "--cursor", first["next_cursor"].(string))
	if keyOf(first) != "short" || keyOf(second) != "k" || second["next_cursor"] != "" {
		t.Fatalf("audit --op acquire --owner w1 newest first: %v then %v", first, second)
	}
	if none := c.runJSON(t, 0, "audit", "-n", "ops", "--op", "release,revoke"); len(none["records"].([]any)) != 0 {
		t.Fatalf("audit --op release,revoke: %v, want none", none)
	}
	exp := c.run(t, "audit", "export", "-n", "ops")
	if exp.code != 0 || strings.Count(exp.stdout, "\n") != 2 || !strings.Contains(exp.stdout, `"op":"acquire"`) {
		t.Fatalf("audit export:\n%s", exp)
	}
	// The prune removes the acquire of the ended lease (short); k's lease
	// is live, and its acquire, which a retry is answered from, stays.
	pr := c.run(t, "audit", "prune", "--before", "0s", "--yes", "-o", "json")
	if pr.code != 0 || !strings.Contains(pr.stdout, `"removed":1,`) {
		t.Fatalf("audit prune:\n%s", pr)
	}
	if pruned := c.runJSON(t, 0, "audit", "-A", "--op", "prune"); len(pruned["records"].([]any)) != 1 {
		t.Fatalf("audit --op prune after a prune: %v, want its record", pruned)
	}
	// fencing raise: an etcd store's tokens are the cluster's revision,
	// raised at a restore with etcdutl's --bump-revision, which the
	// refusal names.
	if r := c.run(t, "fencing", "raise"); r.code != 2 || !strings.Contains(r.stderr+r.stdout, "--bump-revision") {
		t.Fatalf("fencing raise on etcd: want exit 2 naming --bump-revision\n%s", r)
	}
	if r := c.run(t, "migrate", "down"); r.code != 2 || !strings.Contains(r.stderr+r.stdout, "--destroy-data") {
		t.Fatalf("migrate down of a store with leases: want exit 2 naming --destroy-data\n%s", r)
	}
	c.runJSON(t, 0, "migrate", "down", "--destroy-data")
	if st := c.runJSON(t, 0, "migrate", "status"); st["version"] != float64(0) {
		t.Fatalf("migrate status after down: %v", st)
	}
}

// TestEtcdTLS: leasectl on an etcds:// DSN against a cluster of its own
// that requires client certificates: health and a lease work with the
// right files; a CA that did not sign the members' certificate exits 5
// within the DSN's dial-timeout, saying to give the right cacert=.
func TestEtcdTLS(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "cluster")
	serverCert, serverKey := ca.Server(t)
	clientCert, clientKey := ca.Client(t, "leasectl")
	cl, err := etcdcluster.Start(t.Context(), &etcdcluster.Options{Members: 1, TLS: &etcdcluster.TLSFiles{
		CertFile: serverCert, KeyFile: serverKey, ClientCA: ca.CertFile,
		CAFile: ca.CertFile, ClientCert: clientCert, ClientKey: clientKey,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	dsn := cl.DSN("leasectl-tls")
	if !strings.HasPrefix(dsn, "etcds://") {
		t.Fatalf("DSN %s, want etcds://", dsn)
	}
	c := leasectl{dir: t.TempDir(), dsn: dsn}
	c.runJSON(t, 0, "health")
	result(t, c.runJSON(t, 0, "acquire", "k", "--owner", "w1"), "acquired")

	// A CA that did not sign the member's certificate, with leasectl's
	// defaults (--timeout 5s, no dial-timeout): the findings come before
	// the deadline (they used to end in a bare timeout there).
	other := testca.New(t, "other")
	wrong := leasectl{dir: t.TempDir(), dsn: strings.Replace(dsn, "cacert="+url.QueryEscape(ca.CertFile), "cacert="+url.QueryEscape(other.CertFile), 1)}
	start := time.Now()
	r := wrong.run(t, "get", "k")
	// (The DSN in the message names cacert= too: the advice is checked.)
	if r.code != 5 || !strings.Contains(r.stderr, "unavailable") || !strings.Contains(r.stderr, "give that CA as cacert=") {
		t.Fatalf("%s\nwant exit 5, unavailable, advising cacert=", r)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("leasectl took %v with --timeout 5s", took)
	}
}

// audit --follow --since T on etcd (whose Follow streams from a cursor)
// prints the records from T on, then what follows, not the whole trail.
func TestEtcdAuditFollowSince(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: etcdDSN(t)}
	result(t, c.runJSON(t, 0, "acquire", "old", "--owner", "w"), "acquired")
	time.Sleep(100 * time.Millisecond)
	since := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(100 * time.Millisecond)
	result(t, c.runJSON(t, 0, "acquire", "recent", "--owner", "w"), "acquired")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := c.command(ctx, "audit", "--follow", "--since", since, "-o", "json")
	lines := startLines(t, cmd)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for _, want := range []string{"recent", "new"} {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("audit --follow ended early; stderr: %s", cmd.Stderr)
			}
			if !strings.Contains(line, `"key":"`+want+`"`) {
				t.Fatalf("audit --follow --since (after old's acquire) printed %s, want the record of %s", line, want)
			}
		case <-ctx.Done():
			t.Fatalf("no follow line for %s; stderr: %s", want, cmd.Stderr)
		}
		if want == "recent" {
			result(t, c.runJSON(t, 0, "acquire", "new", "--owner", "w"), "acquired")
		}
	}
}

// TestEtcdRefusedCredentialsExit7: on a cluster with authentication on,
// a wrong password, and a user whose role may only read the prefix, are
// refusals of the DSN's credentials or their permission, not an outage:
// exit 7 (status unauthorized, forbidden), naming the fix, as for a
// served store's 401 and 403 (DESIGN.md). They exited 5.
func TestEtcdRefusedCredentialsExit7(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cl, err := etcdcluster.Start(ctx, &etcdcluster.Options{Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	cli, err := cl.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const prefix = "/creds/"
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "reader", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "reader", "readerpw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "reader", "reader"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user, password string) leasectl {
		u, err := url.Parse(cl.DSN(prefix))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, password)
		return leasectl{dir: t.TempDir(), dsn: u.String()}
	}
	as("root", "rootpw").runJSON(t, 0, "migrate", "up")
	for _, tc := range []struct {
		c      leasectl
		args   []string
		status string
		names  string
	}{
		{as("root", "wr0ngpw"), []string{"get", "k"}, "unauthorized", "the DSN's user and password"},
		{as("root", "wr0ngpw"), []string{"health"}, "unauthorized", "the DSN's user and password"},
		{as("reader", "readerpw"), []string{"acquire", "k", "--owner", "w"}, "forbidden", "etcdctl role grant-permission"},
		{as("reader", "readerpw"), []string{"health"}, "forbidden", "etcdctl role grant-permission"},
	} {
		r := tc.c.run(t, append(tc.args, "-o", "json")...)
		if r.code != 7 || r.obj(t)["status"] != tc.status || !strings.Contains(r.stdout, tc.names) || strings.Contains(r.stdout+r.stderr, "wr0ngpw") {
			t.Errorf("%v: want exit 7, status %s, naming %q, without the password:\n%s", tc.args, tc.status, tc.names, r)
		}
	}
	if r := as("reader", "readerpw").run(t, "get", "k"); r.code != 4 {
		t.Errorf("get by a user whose role may read: want exit 4 (not found):\n%s", r)
	}
}

// TestEtcdMigrateStatusShowsAppliedAt: migrate status on an etcd store
// shows when its format version was recorded (the meta entry's
// created_at) under APPLIED AT, and in applied_at with -o json, as it
// does for PostgreSQL's and SQLite's migrations. It left both empty.
func TestEtcdMigrateStatusShowsAppliedAt(t *testing.T) {
	t.Parallel()
	c := leasectl{dir: t.TempDir(), dsn: etcdDSN(t)}
	before := time.Now().UTC().Truncate(time.Second)
	c.runJSON(t, 0, "migrate", "up")
	after := time.Now().UTC()
	st := c.runJSON(t, 0, "migrate", "status")
	ms := st["migrations"].([]any)
	applied, _ := ms[0].(map[string]any)["applied_at"].(string)
	at, err := time.Parse(time.RFC3339Nano, applied)
	if len(ms) != 1 || err != nil || at.Before(before) || at.After(after) {
		t.Fatalf("migrate status after up: %v; want applied_at the time of migrate up (between %s and %s)",
			st, before.Format(time.RFC3339), after.Format(time.RFC3339))
	}
	r := c.run(t, "migrate", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "APPLIED AT") || !strings.Contains(r.stdout, at.Format("2006-01-02")) {
		t.Fatalf("migrate status (table): want the time under APPLIED AT:\n%s", r)
	}
}
