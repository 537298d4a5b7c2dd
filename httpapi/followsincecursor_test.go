package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFollowGivenBothSinceAndCursorIsRefused: the audit follow stream
// starts after cursor or at since, one start: a request giving both is
// refused, 400 invalid, naming the two, before the stream starts. The
// server let the cursor win and dropped since without a word, so a client
// that asked for the records of the last hour got those after a cursor.
// GET /v1/audit, where since is a filter that its pages (cursor) go on
// with, still takes both.
func TestFollowGivenBothSinceAndCursorIsRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	expect(t, "acquire", send(t, "POST", s.url+"/v1/acquire", `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`), 200, "acquired")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/audit/follow?namespace=ns&since=1h&cursor=a1.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		_ = resp.Body.Close()
		t.Fatalf("follow with since and cursor: HTTP 200, the stream started; want 400 invalid naming both")
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	m := expect(t, "follow with since and cursor", reply{code: resp.StatusCode, header: resp.Header, body: string(body)},
		http.StatusBadRequest, "invalid")
	if msg, _ := m["message"].(string); !strings.Contains(msg, "since") || !strings.Contains(msg, "cursor") {
		t.Errorf("message %q does not name since and cursor", msg)
	}
	expect(t, "audit page with since and cursor", send(t, http.MethodGet, s.url+"/v1/audit?namespace=ns&since=1h&cursor=a1.0", ""),
		http.StatusOK, "found")
}
