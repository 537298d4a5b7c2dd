package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

const (
	readerToken = "reader-token-0123456789"
	writerToken = "writer-token-0123456789"
	adminToken  = "admin-token-0123456789a"
	billingTok  = "billing-admin-0123456789"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func tokensFile() string {
	return `# leasestore tokens
` + readerToken + ` reader scan,scan-*
sha256:` + sha(writerToken) + ` writer scan*   # hashed
` + adminToken + ` admin *

` + billingTok + ` admin billing
`
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	if toks.Len() != 4 {
		t.Fatalf("%d tokens, want 4", toks.Len())
	}
	for name, file := range map[string]string{
		"two fields":    "abcdefghijklmnopqrstuvwxyz reader",
		"unknown role":  "abcdefghijklmnopqrstuvwxyz owner ns",
		"short token":   "short reader ns",
		"bad hash":      "sha256:abcd reader ns",
		"empty glob":    "abcdefghijklmnopqrstuvwxyz reader ns,",
		"duplicate":     "abcdefghijklmnopqrstuvwxyz reader ns\nsha256:" + sha("abcdefghijklmnopqrstuvwxyz") + " admin *",
		"only comments": "# nothing\n\n",
		"control in ns": "abcdefghijklmnopqrstuvwxyz reader n\x01s",
		"four fields":   "abcdefghijklmnopqrstuvwxyz reader ns extra",
	} {
		_, err := httpapi.ParseTokens(strings.NewReader(file))
		if err == nil {
			t.Fatalf("%s: parsed", name)
		}
		if strings.Contains(err.Error(), "abcdefghijklmnopqrstuvwxyz") {
			t.Fatalf("%s: the error shows the token: %v", name, err)
		}
	}
}

// TestAuthorization checks 401 for a missing or unknown token and 403 for a
// role or namespace the token does not cover: a reader cannot write, a
// writer cannot revoke, a token for billing cannot see scan.
func TestAuthorization(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	acquire := func(ns string) string {
		return `{"namespace":"` + ns + `","key":"k","owner":"o","ttl":"30s"}`
	}

	r := send(t, "POST", s.url+"/v1/acquire", acquire("scan"))
	expect(t, "no token", r, 401, "unauthorized")
	if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
	}
	expect(t, "unknown token", send(t, "POST", s.url+"/v1/acquire", acquire("scan"), bearer("nope-nope-nope-nope-nope")...), 401, "unauthorized")
	expect(t, "basic auth", send(t, "POST", s.url+"/v1/acquire", acquire("scan"), "Authorization", "Basic "+writerToken), 401, "unauthorized")
	expect(t, "list without token", send(t, "GET", s.url+"/v1/leases/scan", ""), 401, "unauthorized")
	expect(t, "audit without token", send(t, "GET", s.url+"/v1/audit?namespace=scan", ""), 401, "unauthorized")
	// 401 comes before the body is looked at.
	expect(t, "garbage without token", send(t, "POST", s.url+"/v1/acquire", "{"), 401, "unauthorized")

	expect(t, "reader acquires", send(t, "POST", s.url+"/v1/acquire", acquire("scan"), bearer(readerToken)...), 403, "forbidden")
	acq := expect(t, "writer acquires", send(t, "POST", s.url+"/v1/acquire", acquire("scan"), bearer(writerToken)...), 200, "acquired")
	expect(t, "writer, other namespace", send(t, "POST", s.url+"/v1/acquire", acquire("billing"), bearer(writerToken)...), 403, "forbidden")
	expect(t, "writer revokes", send(t, "POST", s.url+"/v1/revoke", `{"namespace":"scan","key":"k","actor":"a","reason":"r"}`,
		bearer(writerToken)...), 403, "forbidden")
	expect(t, "reader gets", send(t, "GET", s.url+"/v1/leases/scan/k", "", bearer(readerToken)...), 200, "found")
	expect(t, "reader lists", send(t, "GET", s.url+"/v1/leases/scan", "", bearer(readerToken)...), 200, "found")
	expect(t, "reader, glob", send(t, "GET", s.url+"/v1/leases/scan-eu", "", bearer(readerToken)...), 200, "found")
	expect(t, "reader, outside globs", send(t, "GET", s.url+"/v1/leases/scanner", "", bearer(readerToken)...), 403, "forbidden")
	expect(t, "reader audits", send(t, "GET", s.url+"/v1/audit?namespace=scan", "", bearer(readerToken)...), 200, "found")
	expect(t, "reader audits everything", send(t, "GET", s.url+"/v1/audit", "", bearer(readerToken)...), 403, "forbidden")
	expect(t, "billing sees scan", send(t, "GET", s.url+"/v1/leases/scan/k", "", bearer(billingTok)...), 403, "forbidden")
	expect(t, "billing audits scan", send(t, "GET", s.url+"/v1/audit?namespace=scan", "", bearer(billingTok)...), 403, "forbidden")
	expect(t, "billing revokes scan", send(t, "POST", s.url+"/v1/revoke", `{"namespace":"scan","key":"k","actor":"a","reason":"r"}`,
		bearer(billingTok)...), 403, "forbidden")
	// Refusals wrote nothing: the writer's lease is still the one live.
	g := expect(t, "still held", send(t, "GET", s.url+"/v1/leases/scan/k", "", bearer(adminToken)...), 200, "found")
	if token(t, g) != token(t, acq) {
		t.Fatalf("lease %v after refusals, want %v", g, acq)
	}
	expect(t, "admin audits everything", send(t, "GET", s.url+"/v1/audit", "", bearer(adminToken)...), 200, "found")
	expect(t, "admin revokes", send(t, "POST", s.url+"/v1/revoke", `{"namespace":"scan","key":"k","actor":"a","reason":"r"}`,
		bearer(adminToken)...), 200, "revoked")
	// Probes need no token.
	expect(t, "healthz", send(t, "GET", s.url+"/healthz", ""), 200, "ok")
	expect(t, "readyz", send(t, "GET", s.url+"/readyz", ""), 200, "healthy")

	// The access log names the role, never a token.
	logged := s.log.String()
	for _, tok := range []string{readerToken, writerToken, adminToken, billingTok, "nope-nope"} {
		if strings.Contains(logged, tok) {
			t.Fatalf("the access log holds a token:\n%s", logged)
		}
	}
	if !strings.Contains(logged, `"role":"writer"`) || !strings.Contains(logged, `"code":403`) {
		t.Fatalf("access log without role or code:\n%s", logged)
	}
}

// TestLoadTokensMessage: LoadTokens names the file once, quoted, then the
// line; a file named "tokens" read "tokens: tokens: line 2: ...".
func TestLoadTokensMessage(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(readerToken+" reader *\nshort reader *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := httpapi.LoadTokens(path)
	if want := `tokens file "` + path + `": line 2: token: shorter than 16 characters`; err == nil || err.Error() != want {
		t.Errorf("LoadTokens: %v, want %s", err, want)
	}
	_, err = httpapi.LoadTokens(path + ".missing")
	if want := `tokens file "` + path + `.missing": no such file or directory`; err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadTokens of a missing file: %v, want %s (fs.ErrNotExist)", err, want)
	}
}

// TestRepeatedAuthorizationIsRefused: a request authenticates once. With
// two Authorization headers the server took the first, while a proxy in
// front that checks (or logs) the last saw another principal; either order
// of a valid and a bogus token is now refused 401, and nothing is written.
func TestRepeatedAuthorizationIsRefused(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	for _, order := range [][2]string{{adminToken, "nope-nope-nope-nope-nope"}, {"nope-nope-nope-nope-nope", adminToken},
		{adminToken, adminToken}} {
		req, err := http.NewRequestWithContext(t.Context(), "POST", s.url+"/v1/acquire",
			strings.NewReader(`{"namespace":"scan","key":"k","owner":"o","ttl":"30s"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Close = true
		req.Header.Add("Authorization", "Bearer "+order[0])
		req.Header.Add("Authorization", "Bearer "+order[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(b), `"status":"unauthorized"`) ||
			!strings.Contains(string(b), "Authorization: given 2 times") {
			t.Errorf("two Authorization headers (%s first): HTTP %d %s, want 401 unauthorized naming the header",
				order[0][:5], resp.StatusCode, b)
		}
		if strings.Contains(string(b), adminToken) {
			t.Errorf("the answer shows the token: %s", b)
		}
	}
	a := expect(t, "audit", send(t, "GET", s.url+"/v1/audit", "", "Authorization", "Bearer "+adminToken), 200, "found")
	if n := len(a["records"].([]any)); n != 0 {
		t.Fatalf("refused requests wrote %d audit records", n)
	}
}
