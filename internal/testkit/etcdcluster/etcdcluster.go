// Package etcdcluster starts a real etcd cluster of separate member
// processes on loopback for tests: each member is the program in ./member
// (go.etcd.io/etcd/server/v3/embed, the version of the client that
// kvstore/etcd uses), built once per test binary with go build, so tests
// can SIGKILL, restart and stop members as the faults they inject.
//
// A test binary starts one cluster in TestMain ([Main]) and gives each
// test its own key prefix ([Cluster.Prefix]). Test scaffolding only: no
// product package may import it (internal/boundary checks).
package etcdcluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// EnvMember names a prebuilt member program to use instead of building ./member.
const EnvMember = "LEASESTORE_ETCD_MEMBER"

// startTimeout bounds [Main]'s and [Shared]'s start: on a clean clone it
// includes compiling etcd's server (a few minutes on two busy cores).
const startTimeout = 15 * time.Minute

// Member is one member process.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	dir       string

	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser // held open: the member exits when it closes (-exit-with-stdin)
	done  chan struct{}  // closed when cmd exited
}

// Cluster is a running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	Members []*Member
	bin     string
	root    string
	initial string // name=peer,... for every member
	tls     *TLSFiles
	seq     atomic.Int64

	maxTxnOps int // 0: etcd's default
}

// Options tunes [Start]. A nil *Options means 3 members in plain text.
type Options struct {
	Members   int       // default 3
	TLS       *TLSFiles // serve clients over TLS; default plain text
	MaxTxnOps int       // most operations in a transaction; default etcd's (128)
}

// TLSFiles are PEM files for a cluster that serves clients over TLS.
type TLSFiles struct {
	// CertFile and KeyFile are every member's server certificate and key
	// (valid for 127.0.0.1). Required.
	CertFile, KeyFile string
	// ClientCA, when set, makes members require client certificates
	// signed by it.
	ClientCA string
	// CAFile, ClientCert and ClientKey are what the harness's own clients
	// ([Cluster.Client]) and [Cluster.DSN] use: the CA that signed
	// CertFile and a client certificate (required when ClientCA is set).
	CAFile, ClientCert, ClientKey string
}

// Start builds the member program (unless [EnvMember] names one) and
// starts a cluster of fresh members in a temporary directory, returning
// once it serves a linearizable read and every member answers. A member
// that could not start (its port, free when picked, taken by another
// process before it listened) makes it start a new cluster on new ports,
// up to startAttempts times: a cluster short of a member has no quorum
// once a test kills one.
func Start(ctx context.Context, opts *Options) (*Cluster, error) {
	var err error
	for range startAttempts {
		var c *Cluster
		if c, err = startOnce(ctx, opts); err == nil {
			if err = c.waitMembers(ctx); err == nil {
				return c, nil
			}
			c.Stop()
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// startAttempts bounds the clusters [Start] starts for one that runs
// whole.
const startAttempts = 3

// waitMembers waits, up to 20 s, until every member answers a status
// request on its own client URL.
func (c *Cluster) waitMembers(ctx context.Context) error {
	cli, err := c.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(20 * time.Second)
	for i, m := range c.Members {
		for {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Status(sctx, m.ClientURL)
			cancel()
			if err == nil {
				break
			}
			if !c.Running(i) || time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("etcdcluster: member %s did not start (logs in %s): %w", m.Name, c.root, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// startOnce is one attempt of [Start].
func startOnce(ctx context.Context, opts *Options) (*Cluster, error) {
	n := 3
	if opts != nil && opts.Members > 0 {
		n = opts.Members
	}
	root, err := os.MkdirTemp("", "leasestore-etcd-")
	if err != nil {
		return nil, err
	}
	bin := os.Getenv(EnvMember)
	if bin == "" {
		if bin, err = build(ctx); err != nil {
			_ = os.RemoveAll(root)
			return nil, err
		}
	}
	c := &Cluster{bin: bin, root: root}
	if opts != nil {
		c.maxTxnOps = opts.MaxTxnOps
	}
	scheme := "http"
	if opts != nil && opts.TLS != nil {
		c.tls, scheme = opts.TLS, "https"
	}
	var peers []string
	for i := range n {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		m := &Member{Name: fmt.Sprintf("m%d", i), ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, cp),
			PeerURL: fmt.Sprintf("http://127.0.0.1:%d", pp), dir: filepath.Join(root, fmt.Sprintf("m%d", i))}
		c.Members = append(c.Members, m)
		peers = append(peers, m.Name+"="+m.PeerURL)
	}
	c.initial = strings.Join(peers, ",")
	for _, m := range c.Members {
		if err := c.start(m, "new"); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// build compiles ./member, once per version of its sources and of Go, into
// the user's cache directory (linking the etcd server takes seconds, which
// every test binary would pay), and returns the program's path.
func build(ctx context.Context) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return buildIn(ctx, cache)
}

// beforeRename, when set (by a test), runs between building the program
// and renaming it into place.
var beforeRename func()

// buildMu makes the tests of one binary that start clusters at once build
// one after the other: the later ones find the program in place.
var buildMu sync.Mutex

// buildIn is build with the cache directory cache. Test binaries that
// build at once each write a temporary file of their own and rename it
// into place; every one is complete.
func buildIn(ctx context.Context, cache string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	src, err := memberSource()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(runtime.Version()))
	for _, f := range []string{"main.go", "go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("etcdcluster: %w", err)
		}
		h.Write(b)
	}
	dir := filepath.Join(cache, "leasestore-etcd-member", hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, "etcd-member")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("etcdcluster: %w", err)
	}
	f, err := os.CreateTemp(dir, "etcd-member.*.tmp")
	if err != nil {
		return "", fmt.Errorf("etcdcluster: %w", err)
	}
	tmp := f.Name()
	_ = f.Close()
	defer os.Remove(tmp) // gone after the rename; left by a failed build
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-trimpath", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("etcdcluster: build the member program in %s: %v\n%s", src, err, out)
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("etcdcluster: %w", err)
	}
	return bin, nil
}

// memberSource finds ./member from the test's working directory (a package
// directory of the leasestore module): the directory of the module's go.mod,
// then internal/testkit/etcdcluster/member.
func memberSource() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("etcdcluster: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("etcdcluster: not inside the leasestore module")
	}
	return filepath.Join(filepath.Dir(mod), "internal", "testkit", "etcdcluster", "member"), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs m's process with the given initial cluster state.
func (c *Cluster) start(m *Member, state string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cmd := exec.Command(c.bin, "-name", m.Name, "-dir", m.dir, "-client", m.ClientURL, "-peer", m.PeerURL,
		"-cluster", c.initial, "-state", state, "-exit-with-stdin")
	if c.maxTxnOps > 0 {
		cmd.Args = append(cmd.Args, "-max-txn-ops", fmt.Sprint(c.maxTxnOps))
	}
	if c.tls != nil {
		cmd.Args = append(cmd.Args, "-cert", c.tls.CertFile, "-key", c.tls.KeyFile)
		if c.tls.ClientCA != "" {
			cmd.Args = append(cmd.Args, "-client-ca", c.tls.ClientCA)
		}
	}
	cmd.Stdout = nil
	logf, err := os.OpenFile(filepath.Join(c.root, m.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	// The member reads its stdin until it ends: when this process dies
	// (a test killed by its timeout skips every cleanup), the pipe closes
	// and the member stops instead of running on.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("etcdcluster: start %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() {
		// Drain stdout ("ready") so the member never blocks on it.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
		}
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	m.cmd, m.stdin, m.done = cmd, stdin, done
	return nil
}

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// Client returns a new client of every member (with the TLS files of
// [Options.TLS] when the cluster serves TLS); the caller closes it.
func (c *Cluster) Client() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c.tls != nil {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		pem, err := os.ReadFile(c.tls.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcdcluster: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcdcluster: %s holds no certificate", c.tls.CAFile)
		}
		if c.tls.ClientCert != "" {
			pair, err := tls.LoadX509KeyPair(c.tls.ClientCert, c.tls.ClientKey)
			if err != nil {
				return nil, fmt.Errorf("etcdcluster: %w", err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}

// WaitHealthy waits until the cluster answers a linearizable read.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	cli, err := c.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(rctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("etcdcluster: the cluster did not become healthy (logs in %s): %w", c.root, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL to member i and waits until it exited.
func (c *Cluster) Kill(i int) {
	m := c.Members[i]
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Restart starts member i again on its data directory (after Kill).
func (c *Cluster) Restart(i int) error {
	m := c.Members[i]
	select {
	case <-m.done:
	default:
		return fmt.Errorf("etcdcluster: %s is still running", m.Name)
	}
	return c.start(m, "existing")
}

// Replace kills every member, removes its data and starts a fresh one on
// the same addresses: to a client the cluster's data and revision go back
// to the start, as a restore from a snapshot taken before anything was
// written, without --bump-revision, would take them back. It returns
// once the fresh cluster serves a linearizable read.
func (c *Cluster) Replace(ctx context.Context) error {
	for i, m := range c.Members {
		c.Kill(i)
		if err := os.RemoveAll(m.dir); err != nil {
			return fmt.Errorf("etcdcluster: replace %s: %w", m.Name, err)
		}
	}
	for _, m := range c.Members {
		if err := c.start(m, "new"); err != nil {
			return err
		}
	}
	return c.WaitHealthy(ctx)
}

// SaveData copies member i's data directory (the member must be down,
// after Kill) to dst, a directory that does not exist yet.
func (c *Cluster) SaveData(i int, dst string) error {
	if c.Running(i) {
		return fmt.Errorf("etcdcluster: %s is still running", c.Members[i].Name)
	}
	return os.CopyFS(dst, os.DirFS(c.Members[i].dir))
}

// LoadData replaces member i's data directory (the member must be down)
// by the copy SaveData made in src: restarted, the member has its old
// state, as one restarted from an old backup of its data directory.
func (c *Cluster) LoadData(i int, src string) error {
	if c.Running(i) {
		return fmt.Errorf("etcdcluster: %s is still running", c.Members[i].Name)
	}
	if err := os.RemoveAll(c.Members[i].dir); err != nil {
		return fmt.Errorf("etcdcluster: %w", err)
	}
	return os.CopyFS(c.Members[i].dir, os.DirFS(src))
}

// Running reports whether member i's process runs.
func (c *Cluster) Running(i int) bool {
	m := c.Members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Leader returns the index of the member that is leader now, asking each
// running member; -1 when none answers as leader.
func (c *Cluster) Leader(ctx context.Context) int {
	cli, err := c.Client()
	if err != nil {
		return -1
	}
	defer cli.Close()
	for i, m := range c.Members {
		if !c.Running(i) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// Stop ends every member (SIGTERM, then SIGKILL after 5s) and removes the
// data directories.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		m.mu.Lock()
		cmd, done := m.cmd, m.done
		m.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
	_ = os.RemoveAll(c.root)
}

// Prefix returns a key prefix of the cluster that no other call returns,
// named after t, and deletes the keys under it when t ends.
func (c *Cluster) Prefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	p := fmt.Sprintf("/test/%s-%d/", name, c.seq.Add(1))
	t.Cleanup(func() {
		cli, err := c.Client()
		if err != nil {
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = cli.Delete(ctx, p, clientv3.WithPrefix())
	})
	return p
}

// DSN returns the leasectl DSN of the store under prefix: etcds:// with
// the TLS files of [Options.TLS] (cacert=, cert=, key=) when the cluster
// serves TLS.
func (c *Cluster) DSN(prefix string) string {
	var hosts []string
	for _, m := range c.Members {
		_, host, _ := strings.Cut(m.ClientURL, "://")
		hosts = append(hosts, host)
	}
	if c.tls == nil {
		return "etcd://" + strings.Join(hosts, ",") + "/" + strings.Trim(prefix, "/")
	}
	q := url.Values{"cacert": {c.tls.CAFile}}
	if c.tls.ClientCert != "" {
		q.Set("cert", c.tls.ClientCert)
		q.Set("key", c.tls.ClientKey)
	}
	return "etcds://" + strings.Join(hosts, ",") + "/" + strings.Trim(prefix, "/") + "?" + q.Encode()
}

// shared is the cluster of [Main].
var shared *Cluster

// Main starts one cluster for the test binary, runs the tests, stops the
// cluster, checks that no goroutine was left behind (goleak) and exits. Tests reach it with [Shared].
func Main(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	c, err := Start(ctx, nil)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	c.Stop()
	if code == 0 {
		// Every Backend, client and watch of the tests is closed by now.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Shared returns the cluster of [Main], or, in a test binary whose
// TestMain does not call Main, one started on first use (stop it with
// [StopShared] when the tests end).
func Shared(t testing.TB) *Cluster {
	t.Helper()
	if shared != nil {
		return shared
	}
	lazy.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		lazy.c, lazy.err = Start(ctx, nil)
	})
	if lazy.err != nil {
		t.Fatal(lazy.err)
	}
	return lazy.c
}

var lazy struct {
	once sync.Once
	c    *Cluster
	err  error
}

// StopShared stops the cluster [Shared] started on first use, if any.
func StopShared() {
	if lazy.c != nil {
		lazy.c.Stop()
	}
}

// WithShared wraps m so that its Run stops the cluster [Shared] may have
// started once the tests ran (for goleak.VerifyTestMain(WithShared(m))).
func WithShared(m *testing.M) interface{ Run() int } { return withShared{m} }

type withShared struct{ m *testing.M }

func (w withShared) Run() int {
	code := w.m.Run()
	StopShared()
	return code
}
