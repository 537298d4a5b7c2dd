package cli

import (
	"strings"
	"testing"
)

// A read (get, list, describe) that gets no answer before --timeout exits
// 5 saying the deadline passed, without telling the user to "retry with
// the same request id to learn the outcome": a read changes nothing, so
// there is no outcome to learn, and these commands take no --request-id.
// A change (acquire) that gets no answer keeps that advice: its effect is
// unknown.
func TestReadTimeoutDoesNotAskForTheRequestID(t *testing.T) {
	t.Parallel()
	dsn := blackHole(t)
	for _, args := range [][]string{{"get", "k"}, {"list"}, {"describe", "k"}} {
		o := runCLI(t, env{}, append(args, "--dsn", dsn, "--timeout", "300ms", "-o", "json")...)
		wantCode(t, o, ExitUnavailable)
		msg, _ := o.json(t)["message"].(string)
		if !strings.Contains(msg, "deadline passed") || strings.Contains(msg, "request id") {
			t.Errorf("%s timed out: message %q, want the deadline named and no advice to retry with the same request id",
				strings.Join(args, " "), msg)
		}
	}
	o := runCLI(t, env{}, "acquire", "k", "--owner", "o", "--dsn", dsn, "--timeout", "300ms", "-o", "json")
	wantCode(t, o, ExitUnavailable)
	if msg, _ := o.json(t)["message"].(string); !strings.Contains(msg, "retry with the same request id") {
		t.Errorf("acquire timed out: message %q, want the advice to retry with the same request id", msg)
	}
}
