package cli

import (
	"strings"
	"testing"
)

// A PostgreSQL URL DSN whose password holds an '@' written as is, not as
// %40: pgx, as libpq, ends the password at the first '@' and reads the rest
// of it as the host, which its connection errors name. Every command, serve
// and migrate included, refuses such a DSN as bad input (exit 2), saying to
// write the '@' as %40, and prints no part of the password. etcd's DSN reads
// the password up to the last '@' before the hosts (as net/url does), so
// the same DSN there connects with the whole password, and what leasectl
// prints of it holds none of it either.
func TestDSNWithABareAtInThePassword(t *testing.T) {
	t.Parallel()
	const head, tail = "correct", "horse-battery-staple"
	pg := "postgres://app:" + head + "@" + tail + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"
	for _, args := range [][]string{
		{"health"}, {"health", "-o", "json"}, {"get", "k"}, {"migrate", "status"}, {"migrate", "up"},
		{"serve", "--listen", "127.0.0.1:0"},
	} {
		for how, e := range map[string]env{"LEASESTORE_DSN": {EnvDSN: pg}, "--dsn": {}} {
			run := args
			if how == "--dsn" {
				run = append([]string{"--dsn", pg}, args...)
			}
			o := runCLI(t, e, run...)
			out := o.stdout + o.stderr
			if strings.Contains(out, tail) {
				t.Errorf("%s with the DSN in %s prints %q of the password %q\nstdout: %s\nstderr: %s",
					strings.Join(args, " "), how, tail, head+"@"+tail, o.stdout, o.stderr)
			}
			if o.code != ExitUsage || !strings.Contains(out, "%40") {
				t.Errorf("%s with the DSN in %s: exit %d, want %d (invalid), saying to write the '@' as %%40\nstdout: %s\nstderr: %s",
					strings.Join(args, " "), how, o.code, ExitUsage, o.stdout, o.stderr)
			}
		}
	}
	etcdDSN := "etcd://app:" + head + "@" + tail + "@127.0.0.1:1/pre?dial-timeout=1s"
	for _, args := range [][]string{{"health"}, {"health", "-o", "json"}} {
		o := runCLI(t, env{EnvDSN: etcdDSN}, args...)
		if o.code == ExitOK || strings.Contains(o.stdout+o.stderr, tail) || strings.Contains(o.stdout+o.stderr, head) {
			t.Errorf("%s on %s: exit %d, want a refusal that prints no part of the password\nstdout: %s\nstderr: %s",
				strings.Join(args, " "), etcdDSN, o.code, o.stdout, o.stderr)
		}
	}
}
