package cli

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// splitRecordLine splits a watch (or audit --follow) line into its
// fields: separated by blanks, a field (or the value after NAME=) that
// starts with a double quote is a Go-quoted string up to its closing
// quote, unquoted. It fails the test on a quote that does not close.
func splitRecordLine(t *testing.T, line string) []string {
	t.Helper()
	var fields []string
	for rest := strings.TrimRight(line, "\n"); rest != ""; {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			break
		}
		name := ""
		if i := strings.IndexAny(rest, "= \""); i >= 0 && rest[i] == '=' {
			name, rest = rest[:i+1], rest[i+1:]
		}
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				t.Fatalf("line %q: a quote that does not close: %v", line, err)
			}
			v, _ := strconv.Unquote(q)
			fields, rest = append(fields, name+v), rest[len(q):]
			continue
		}
		end := strings.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		fields, rest = append(fields, name+rest[:end]), rest[end:]
	}
	return fields
}

// watch's lines read back: an owner, an actor and a key holding blanks
// (or a double quote) are quoted as the line's reason is, so that a line
// splits into the same fields whatever the values hold. Unquoted, "owner
// team a" printed `owner=team a token=1`, whose fields a reader cannot
// tell from an owner "team" and a field "a".
func TestWatchLineQuotesValuesWithBlanks(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	owner, name := "team a", `job "nightly" 1`
	wantCode(t, runCLI(t, e, "acquire", name, "--owner", owner), ExitOK)
	wantCode(t, runCLI(t, e, "revoke", name, "--actor", "ops on call", "--reason", "stuck"), ExitOK)
	w := startWatch(e, "--since", "1h", "--interval", "20ms")
	if !w.waitFor(t, false, "revoke", 10*time.Second) {
		w.stop(t)
		t.Fatalf("watch printed no revoke in 10s:\n%s\n%s", w.out.String(), w.errs.String())
	}
	out := w.stop(t)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("watch printed %d lines, want 2 (acquire, revoke):\n%s", len(lines), out)
	}
	for i, want := range []struct{ op, actor string }{{"acquire", owner}, {"revoke", "ops on call"}} {
		f := splitRecordLine(t, lines[i])
		if len(f) < 8 || f[2] != want.op || f[3] != "default/"+name || f[4] != "owner="+owner || f[6] != "actor="+want.actor {
			t.Errorf("watch line %q reads back as %q: want the fields id, at, %s, %q, %q, token=N, %q, status=S",
				lines[i], f, want.op, "default/"+name, "owner="+owner, "actor="+want.actor)
		}
	}
}
