package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/leasestore/leasestore/protocol"
)

// allCursorPrefix starts the cursors of `list -A`: A1.<namespace in
// base64url>.<the list cursor within it, empty for its first page>.
const allCursorPrefix = "A1."

// encodeAllCursor returns the -A cursor that resumes at namespace ns with
// its list cursor inner ("" for the namespace's first lease).
func encodeAllCursor(ns, inner string) string {
	return allCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(ns)) + "." + inner
}

// decodeAllCursor parses an -A cursor; "" is the start (namespace "").
func decodeAllCursor(c string) (ns, inner string, err error) {
	if c == "" {
		return "", "", nil
	}
	rest, ok := strings.CutPrefix(c, allCursorPrefix)
	if ok {
		var enc string
		enc, inner, ok = strings.Cut(rest, ".")
		if ok {
			var b []byte
			if b, err = base64.RawURLEncoding.DecodeString(enc); err == nil {
				return string(b), inner, nil
			}
		}
	}
	return "", "", fmt.Errorf("--cursor: %q is not a cursor of list -A (pass the next_cursor list -A printed)", c)
}

// listAllNamespaces reads one page of req's leases across every namespace
// that holds a live lease, by namespace and then key, starting where
// req.Cursor (an -A cursor) says. The page's NextCursor is an -A cursor.
func listAllNamespaces(ctx context.Context, s *store, req protocol.ListRequest) (protocol.ListResult, error) {
	ns, inner, err := decodeAllCursor(req.Cursor)
	if err != nil {
		return protocol.ListResult{}, err
	}
	limit := req.Limit
	if limit == 0 {
		limit = protocol.DefaultListLimit
	}
	// The namespaces to read: ns itself when the cursor names it (a page
	// stopped inside it), then the ones after it.
	var queue []string
	if req.Cursor != "" {
		queue = append(queue, ns)
	}
	next := func() (string, bool, error) {
		if len(queue) == 0 {
			page, ok, err := namespaces(ctx, s, ns)
			if err == nil && !ok {
				err = fmt.Errorf("list -A: the %s store cannot list namespaces; use -n", s.backend)
			}
			if err != nil || len(page) == 0 {
				return "", false, err
			}
			queue = page
		}
		n := queue[0]
		queue, ns = queue[1:], n
		return n, true, nil
	}
	out := protocol.ListResult{Status: protocol.StatusFound}
	for {
		cur, ok, err := next()
		if err != nil || !ok {
			return out, err
		}
		q := req
		q.Namespace, q.Cursor, q.Limit = cur, inner, limit-len(out.Leases)
		inner = ""
		page, err := s.rt.List(ctx, q)
		if err != nil {
			return protocol.ListResult{}, err
		}
		out.Leases = append(out.Leases, page.Leases...)
		if len(out.Leases) < limit {
			continue
		}
		if page.NextCursor != "" {
			out.NextCursor = encodeAllCursor(cur, page.NextCursor)
			return out, nil
		}
		// The page is full and ends this namespace: resume at the next
		// one, if any.
		after, ok, err := next()
		if err != nil {
			return protocol.ListResult{}, err
		}
		if ok {
			out.NextCursor = encodeAllCursor(after, "")
		}
		return out, nil
	}
}
