package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFollowFromACursorPastTheEndIsRefused: GET /v1/audit/follow from a
// cursor no record of the served store has reached (one of another store)
// is refused 400 invalid, naming why, before the stream starts. It was
// taken (200, subscribed) and skipped every record until the trail caught
// up with the cursor.
func TestFollowFromACursorPastTheEndIsRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/audit/follow?namespace=ns&cursor=a1.1099511627776", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body) // a stream ends with ctx
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"status":"invalid"`) ||
		!strings.Contains(string(body), "past the end of this store's audit trail") {
		t.Errorf("follow from a cursor past the end: %d %q; want 400, invalid, naming the end of the trail", resp.StatusCode, body)
	}
}
