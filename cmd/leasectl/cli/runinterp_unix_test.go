//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunOfAScriptWhoseInterpreterIsMissingTakesNoLease: a script whose
// #! line names an interpreter that does not exist cannot start, as a
// missing CMD cannot; run must know it before it takes the lease and say
// which interpreter is missing, exiting 127 (126 for one that is not
// executable) as a shell does ("bad interpreter"). run found the script
// itself, took the lease, failed to start it with "no such file or
// directory" naming the script, which is there, and released.
func TestRunOfAScriptWhoseInterpreterIsMissingTakesNoLease(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExecutable, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, shebang, interp string
		code                  int
	}{
		{"missing", "#!/nonexistent/interp -x\n", "/nonexistent/interp", exitNotFound},
		{"missing-spaced", "#!  /nonexistent/other\techo\n", "/nonexistent/other", exitNotFound},
		{"not-executable", "#!" + notExecutable + "\n", notExecutable, exitCannotExecute},
	} {
		script := filepath.Join(dir, c.name+".sh")
		if err := os.WriteFile(script, []byte(c.shebang+"echo ran\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"run", "nightly", "--owner", "w", "--", script},
			{"-o", "json", "run", "nightly", "--owner", "w", "--", script},
		} {
			o := runCLI(t, e, args...)
			if o.code != c.code || !strings.Contains(o.stderr, c.interp) || strings.Contains(o.stdout, "ran") {
				t.Errorf("%s: leasectl %s: exit %d, stderr %q; want %d naming the interpreter %s, the script not run",
					c.name, strings.Join(args, " "), o.code, o.stderr, c.code, c.interp)
			}
			if args[0] == "-o" && o.code == c.code {
				if m := o.json(t); m["status"] != StatusError || !strings.Contains(m["message"].(string), c.interp) {
					t.Errorf("%s: -o json: %v, want status error naming the interpreter", c.name, m)
				}
			}
		}
	}
	trail := runCLI(t, e, "audit", "-A", "--since", "1h", "-o", "json")
	wantCode(t, trail, ExitOK)
	if recs, _ := trail.json(t)["records"].([]any); len(recs) != 0 {
		t.Errorf("run of scripts that cannot start wrote %d audit records, want none: %v", len(recs), recs)
	}
	// A script whose interpreter is there runs.
	good := filepath.Join(dir, "good.sh")
	if err := os.WriteFile(good, []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := runCLI(t, e, "run", "nightly", "--owner", "w", "--", good)
	wantCode(t, o, ExitOK)
	if !strings.Contains(o.stdout, "ran") {
		t.Fatalf("the good script did not run: %q", o.stdout)
	}
}

// TestRunJSONWhenTheCommandFailsToStart: a CMD that passes every check
// before the lease is taken and still fails to start (here: an executable
// file in no format the system runs, exec format error) ends run with
// 126, and with -o json that too is one JSON object on stdout, as every
// other failure of run before CMD runs is. run printed nothing on stdout.
func TestRunJSONWhenTheCommandFailsToStart(t *testing.T) {
	t.Parallel()
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, []byte("junk\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := runCLI(t, sqliteEnv(t), "-o", "json", "run", "k", "--owner", "w", "--request-id", "rid-1", "--", junk)
	wantCode(t, o, exitCannotExecute)
	m := o.json(t)
	if msg, _ := m["message"].(string); m["status"] != StatusError || !strings.Contains(msg, junk) || m["request_id"] != "rid-1" {
		t.Fatalf("-o json: %v, want status error naming the command, with the given request id", m)
	}
}
