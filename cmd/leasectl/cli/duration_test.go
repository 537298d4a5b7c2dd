package cli

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The forms an operator types first are accepted end to end.
func TestAuditSinceForms(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	wantCode(t, runCLI(t, e, "acquire", "k", "--owner", "w"), 0)
	for _, since := range []string{"1d", "2020-01-01", "0s"} {
		o := runCLI(t, e, "audit", "--since", since, "-o", "json")
		wantCode(t, o, ExitOK)
		n := len(o.json(t)["records"].([]any))
		if (since == "0s") != (n == 0) {
			t.Errorf("audit --since %s: %d records", since, n)
		}
	}
}

// runCLIFor is runCLI interrupted after d, as main cancels the context on
// SIGINT: for commands that run until interrupted once their flags are
// taken.
func runCLIFor(t *testing.T, d time.Duration, e env, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(d, cancel)
	var stdout, stderr bytes.Buffer
	code := Execute(ctx, args, nil, &stdout, &stderr, e.get)
	return outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// suggested is the duration a refusal's hint tells to write instead.
var suggested = regexp.MustCompile(`write (?:a (?:positive )?duration such as )?([0-9][^\s,)]*)`)

// A bare number's hint names a duration the flag takes: following it is
// not refused again. The hint said "write 0s" for every flag, and 0s was
// then refused (acquire --ttl 0s: outside [1ms, 168h]).
func TestBareNumberHintIsTaken(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for _, args := range [][]string{
		{"acquire", "k", "--ttl", "0"},
		{"renew", "k", "--token", "1", "--ttl", "0"},
		{"get", "k", "--timeout", "0"},
		{"audit", "--follow", "--interval", "0"},
		{"watch", "k", "--interval", "0"},
		{"bench", "-d", "0"},
		{"bench", "--ttl", "0"},
		{"serve", "--listen", "127.0.0.1:0", "--max-timeout", "0"},
		{"serve", "--listen", "127.0.0.1:0", "--shutdown-timeout", "0"},
		{"run", "k", "--grace", "0", "--", "true"},
		{"run", "k", "--ttl", "0", "--", "true"},
		{"demo", "--ttl", "0"},
		{"demo", "--ttl", "200"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, e, args...)
			wantCode(t, o, ExitUsage)
			m := suggested.FindStringSubmatch(o.stderr)
			if m == nil {
				t.Fatalf("stderr %q names no duration to write", o.stderr)
			}
			i := slices.Index(args, "0")
			if i < 0 {
				i = slices.Index(args, "200")
			}
			again := slices.Clone(args)
			again[i] = m[1]
			if o := runCLIFor(t, 2*time.Second, e, again...); o.code == ExitUsage {
				t.Fatalf("%q hinted %s, which is refused in turn: %s", args, m[1], o.stderr)
			}
		})
	}
}

// Every duration flag refuses what its command cannot use when the flag is
// parsed (negatives included: serve --audit-retention -1h was taken, and
// kept every record), and a bare number's hint always proposes a value the
// flag takes. The flags whose help gives 0 a meaning take a bare 0.
func TestDurationFlagsKeepTheirRange(t *testing.T) {
	t.Parallel()
	bareZero := []string{"acquire --wait-timeout", "run --wait-timeout", "acquire --lock-delay", "run --lock-delay",
		"gc --grace", "serve --audit-retention"}
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			n++
			name := c.Name() + " --" + f.Name
			if err := f.Value.Set("-1s"); err == nil {
				t.Errorf("%s takes -1s", name)
			}
			zero := slices.Contains(bareZero, name)
			if err := f.Value.Set("0"); (err == nil) != zero {
				t.Errorf("%s: Set(0) = %v, want a bare 0 taken: %v", name, err, zero)
			}
			for _, bare := range []string{"0", "5", "1000000"} {
				err := f.Value.Set(bare)
				if err == nil {
					continue
				}
				m := suggested.FindStringSubmatch(err.Error())
				if m == nil {
					t.Errorf("%s: Set(%s) = %v, names no duration to write", name, bare, err)
					continue
				}
				if err := f.Value.Set(m[1]); err != nil {
					t.Errorf("%s: Set(%s) hinted %s, refused in turn: %v", name, bare, m[1], err)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	a := &app{}
	walk(a.rootCommand())
	if n < 15 {
		t.Fatalf("found %d duration flags", n)
	}
	e := sqliteEnv(t)
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--audit-retention", "-1h"},
		{"gc", "--grace", "-1h"},
		{"acquire", "k", "--lock-delay", "-1s"},
		{"acquire", "k", "--wait", "--wait-timeout", "-1s"},
		{"run", "k", "--lock-delay", "-1s", "--", "true"},
		{"bench", "--warm-up", "-1s"},
	} {
		o := runCLIFor(t, 3*time.Second, e, args...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, "must not be negative") {
			t.Errorf("%q: exit %d, stderr %q; want 2, must not be negative", args, o.code, o.stderr)
		}
	}
}

// renew --ttl 0s is refused (only leaving --ttl out keeps the lease's
// TTL), and the refusal says so.
func TestRenewZeroTTLNamesTheWayToKeepTheTTL(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	o := runCLI(t, e, "renew", "k", "--owner", "o", "--token", "1", "--ttl", "0s")
	wantCode(t, o, ExitUsage)
	if !strings.Contains(o.stderr, "leave --ttl out to keep the lease's own TTL") {
		t.Fatalf("renew --ttl 0s: stderr %q does not say to leave --ttl out", o.stderr)
	}
}

// Help prints a duration flag's default in the duration grammar leasectl
// reads (1h, not 1h0m0s), and prints none where the default is zero:
// those flags say in their own words what zero means (renew --ttl: the
// lease's own TTL), and "(default 0s)" after that contradicted them.
func TestHelpShowsDurationDefaultsInTheGrammar(t *testing.T) {
	t.Parallel()
	a := &app{getenv: env{}.get, defaultOwner: "u@h"}
	var bad []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			line := c.CommandPath() + " --" + f.Name
			switch {
			case f.DefValue == "0s":
				bad = append(bad, line+": (default 0s)")
			case strings.HasSuffix(f.DefValue, "m0s") || strings.HasSuffix(f.DefValue, "h0m"):
				bad = append(bad, line+": (default "+f.DefValue+")")
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.rootCommand())
	if len(bad) > 0 {
		t.Errorf("duration defaults help prints outside the grammar or against the flag's own words:\n%s", strings.Join(bad, "\n"))
	}
	o := runCLI(t, env{}, "renew", "--help")
	wantCode(t, o, ExitOK)
	if strings.Contains(o.stdout, "(default 0s)") {
		t.Errorf("renew --help: %s", o.stdout)
	}
}
