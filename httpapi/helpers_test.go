package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/testkit/syncbuf"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// clock is a manual clock for the in-memory store.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// server is a handler over an in-memory store on a loopback port.
type server struct {
	url   string
	clock *clock
	rt    *protocol.Runtime
	log   *syncbuf.Buffer
	h     *httpapi.Handler
}

// newServer serves a fresh in-memory store. cfg may be nil; its Logger is
// replaced by a JSON logger into server.log.
func newServer(t *testing.T, cfg *httpapi.Config) *server {
	t.Helper()
	s := &server{clock: &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}, log: &syncbuf.Buffer{}}
	b := memstore.New(&memstore.Config{Now: s.clock.Now})
	s.rt = protocol.New(b, nil)
	if cfg == nil {
		cfg = &httpapi.Config{}
	}
	c := *cfg
	c.Logger = slog.New(slog.NewJSONHandler(s.log, nil))
	h, err := httpapi.NewHandler(s.rt, b, &c)
	if err != nil {
		t.Fatal(err)
	}
	s.h = h
	srv := httptest.NewServer(h)
	s.url = srv.URL
	t.Cleanup(func() {
		srv.Close()
		_ = s.rt.Close(context.Background())
	})
	return s
}

// reply is one HTTP answer.
type reply struct {
	code   int
	header http.Header
	body   string
}

// obj decodes the body as one JSON object.
func (r reply) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// send makes one request with plain net/http. headers are name, value pairs.
func send(t *testing.T, method, url, body string, headers ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection outlives the test
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

// expect checks an answer's code and body status and returns the body.
func expect(t *testing.T, what string, r reply, code int, status string) map[string]any {
	t.Helper()
	m := r.obj(t)
	if r.code != code || m["status"] != status {
		t.Fatalf("%s: HTTP %d status %v, want HTTP %d status %q\n%s", what, r.code, m["status"], code, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", what, ct)
	}
	return m
}

// token reads the lease token of a result body.
func token(t *testing.T, m map[string]any) int64 {
	t.Helper()
	l, ok := m["lease"].(map[string]any)
	if !ok {
		t.Fatalf("no lease in %v", m)
	}
	return int64(l["token"].(float64))
}
