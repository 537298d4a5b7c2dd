package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The HTTP API takes the CLI's duration grammar (docs/http-api.md,
// "Durations and times"; contract v3: one duration grammar for CLI and
// API alike), and a refusal quotes a limit the way users write it, as the
// API's own refusal of ttl 8d does ("8d is outside [1ms, 7d]") and the
// CLI's every flag does: never Go's "168h0m0s" or "1h0m0s", which no one
// wrote.
func TestAPIRefusalsQuoteDurationsAsWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "leases.db"), nil)
	for _, body := range []string{
		`{"namespace":"n","key":"k","owner":"o","ttl":"0s"}`,
		`{"namespace":"n","key":"k","owner":"o","ttl":"1000000"}`,
		`{"namespace":"n","key":"k","owner":"o","ttl":"30s","lock_delay":"2h"}`,
	} {
		msg, _ := call(t, "POST", s.url+"/v1/acquire", body).want(t, body, 400, "invalid")["message"].(string)
		if strings.Contains(msg, "h0m0s") {
			t.Errorf("POST /v1/acquire %s: refused with %q, which quotes a duration in Go's form, not as users write it (7d, 1h, 2h)", body, msg)
		}
	}
}
