package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawGet sends one GET whose request target is path exactly as given (no
// escaping by a client library) and returns the code and the body.
func rawGet(t *testing.T, url, path string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestRawUTF8PathKeepsItsEscapedSlash: a request target that carries a
// character unescaped (raw UTF-8, as a hand-written client sends it) beside
// a %2F names the key the %2F says, or is refused; it never names another
// key. net/url drops the raw form of such a path (RawPath) and EscapedPath
// re-escapes the decoded one, where %2F has become a slash, so the server
// split GET /v1/leases/a%2Fb/ü as namespace "a", key "b/ü": the lease of
// another holder, and a list of namespace "a/b" became a get.
func TestRawUTF8PathKeepsItsEscapedSlash(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	expect(t, "acquire a/b|ü", send(t, "POST", s.url+"/v1/acquire",
		`{"namespace":"a/b","key":"ü","owner":"right","ttl":"60s"}`), 200, "acquired")
	expect(t, "acquire a|b/ü", send(t, "POST", s.url+"/v1/acquire",
		`{"namespace":"a","key":"b/ü","owner":"wrong","ttl":"60s"}`), 200, "acquired")
	expect(t, "acquire é/b|k", send(t, "POST", s.url+"/v1/acquire",
		`{"namespace":"é/b","key":"k","owner":"right","ttl":"60s"}`), 200, "acquired")

	for _, c := range []struct{ what, path, route string }{
		{"get", "/v1/leases/a%2Fb/ü", "get"},
		{"list", "/v1/leases/é%2Fb", "list"},
	} {
		code, body := rawGet(t, s.url, c.path)
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("%s %s: HTTP %d, body not JSON: %q", c.what, c.path, code, body)
		}
		if code == http.StatusBadRequest && m["status"] == "invalid" {
			continue // refused: fine, nothing misread
		}
		switch c.route {
		case "get":
			l, _ := m["lease"].(map[string]any)
			if code != http.StatusOK || l == nil || l["namespace"] != "a/b" || l["key"] != "ü" {
				t.Errorf("GET %s (namespace a/b, key ü): HTTP %d %s; want the lease of owner right, or 400 invalid", c.path, code, body)
			}
		case "list":
			ls, _ := m["leases"].([]any)
			if code != http.StatusOK || len(ls) != 1 || ls[0].(map[string]any)["owner"] != "right" {
				t.Errorf("GET %s (list of namespace é/b): HTTP %d %s; want a list page with the lease of owner right, or 400 invalid",
					c.path, code, body)
			}
		}
	}
}
