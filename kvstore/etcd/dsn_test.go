package etcd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/kvstore/etcd"
)

func TestParseDSN(t *testing.T) {
	t.Parallel()
	cfg, err := etcd.ParseDSN("etcd://root:p%40ss:w@10.0.0.1:2379,10.0.0.2:2379,[::1]:2379/leasestore/prod?dial-timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Endpoints, " ") != "http://10.0.0.1:2379 http://10.0.0.2:2379 http://[::1]:2379" ||
		cfg.Username != "root" || cfg.Password != "p@ss:w" || cfg.Prefix != "/leasestore/prod/" || cfg.TLS != nil ||
		cfg.DialTimeout != 2*time.Second {
		t.Fatalf("parsed %+v", cfg)
	}
	cfg, err = etcd.ParseDSN("etcds://h:2379/p?insecure-skip-tls-verify=true")
	if err != nil || cfg.TLS == nil || !cfg.TLS.InsecureSkipVerify || cfg.Endpoints[0] != "https://h:2379" {
		t.Fatalf("etcds: %+v %v", cfg, err)
	}
	for _, bad := range []string{
		"etcd://h:2379",               // no prefix
		"etcd://h:2379/",              // empty prefix
		"etcd://h/p",                  // no port
		"etcd://h:1/p?bogus=1",        // unknown parameter
		"etcd://h:1/p?cert=/nonexist", // cert without key
		"etcd://h:1/p?cacert=/nonexistent/ca.pem",
		"etcd://:secret@h:1/p", // no user
		"postgres://h/p",
	} {
		if _, err := etcd.ParseDSN(bad); err == nil {
			t.Errorf("ParseDSN(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseDSN(%q): error repeats the password: %v", bad, err)
		}
	}
	if got := etcd.Redact("etcd://root:s3cret@h:1,h:2/p?cacert=x"); got != "etcd://root:xxxxx@h:1,h:2/p?cacert=x" {
		t.Fatalf("Redact = %q", got)
	}
}

// TestDSNPasswordWithSlash: a password holding a '/' not percent-encoded
// (the docs ask for %2F) cut the DSN there: ParseDSN took "user:s3" for a
// host and port and the rest for the prefix, so the connection errors
// named "http://user:s3" (part of the password), and Redact, which looked
// for the '@' before the first '/', showed the whole password. Now the
// DSN is refused naming the fix, and Redact masks it all the same.
func TestDSNPasswordWithSlash(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"etcd://user:s3/cr3t@h:1/p", "etcds://user:s3/cr3t@h:1,h:2/p?dial-timeout=1s", "etcd://user:s3/cr3t/x@h:1/p"} {
		cfg, err := etcd.ParseDSN(dsn)
		if err == nil {
			t.Errorf("ParseDSN(%q) accepted: endpoints %v, prefix %q", dsn, cfg.Endpoints, cfg.Prefix)
		} else if strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "cr3t") || !strings.Contains(err.Error(), "%2F") {
			t.Errorf("ParseDSN(%q): %v; want an error naming %%2F without the password", dsn, err)
		}
		if got := etcd.Redact(dsn); strings.Contains(got, "s3") || strings.Contains(got, "cr3t") {
			t.Errorf("Redact(%q) = %q", dsn, got)
		}
	}
	// An '@' in the prefix is written %40.
	if cfg, err := etcd.ParseDSN("etcd://h:1/team%40corp"); err != nil || cfg.Prefix != "/team@corp/" {
		t.Errorf("prefix with %%40: %+v %v", cfg, err)
	}
}

// TestParseDSNDialTimeout: dial-timeout takes the project's one duration
// grammar (package durations), days included, as every leasectl flag does;
// a bad value is refused with the form to use. ParseDSN refused
// dial-timeout=1d ("want a duration such as 5s").
func TestParseDSNDialTimeout(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"1d": 24 * time.Hour, "1h30m": 90 * time.Minute, "250ms": 250 * time.Millisecond} {
		cfg, err := etcd.ParseDSN("etcd://h:2379/p?dial-timeout=" + in)
		if err != nil {
			t.Errorf("dial-timeout=%s: %v", in, err)
		} else if cfg.DialTimeout != want {
			t.Errorf("dial-timeout=%s: %v, want %v", in, cfg.DialTimeout, want)
		}
	}
	for in, hint := range map[string]string{
		"5":    `dial-timeout: "5" has no unit: write 5s`,
		"soon": `dial-timeout: "soon" is not a duration`,
		"0s":   `dial-timeout: 0s is not positive`,
		"-1s":  `dial-timeout: -1s is not positive`,
	} {
		if _, err := etcd.ParseDSN("etcd://h:2379/p?dial-timeout=" + in); err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("dial-timeout=%s: %v; want an error saying %s", in, err, hint)
		}
	}
}

// A host list that cannot be dialled as written is refused by ParseDSN,
// naming the host, before Open spends its dial timeout on it and answers
// unavailable: a port that is not a number from 1 to 65535, an empty host,
// blanks or control characters in a host, a NUL in the password (which no
// etcd server takes).
func TestParseDSNRefusesHostsThatCannotBeDialled(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"etcd://127.0.0.1:notaport/p",
		"etcd://127.0.0.1:99999/p",
		"etcd://127.0.0.1:0/p",
		"etcd://127.0.0.1:-1/p",
		"etcd://:2379/p",
		"etcd://127.0.0.1 :2379/p",
		"etcd://h:1,,h:2/p",
		"etcd://root:pa%00ss@h:1/p",
	} {
		cfg, err := etcd.ParseDSN(bad)
		if err == nil {
			t.Errorf("ParseDSN(%q) accepted: endpoints %q", bad, cfg.Endpoints)
		}
	}
	if _, err := etcd.ParseDSN("etcd://localhost:2379,[::1]:65535/p"); err != nil {
		t.Errorf("a good DSN refused: %v", err)
	}
}
