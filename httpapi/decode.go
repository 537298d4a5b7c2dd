package httpapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/durations"
	"github.com/leasestore/leasestore/internal/listcursor"
	"github.com/leasestore/leasestore/internal/wire"
	"github.com/leasestore/leasestore/protocol"
)

// The request bodies of the POST routes. Fields are sent as the client
// has them; validation is the store's (protocol's Validate), so that the
// API and the library refuse the same input with the same message.
type (
	acquireBody struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
		Owner     string `json:"owner"`
		TTL       string `json:"ttl"`
		RequestID string `json:"request_id,omitempty"`
		LockDelay string `json:"lock_delay,omitempty"`
	}
	renewBody struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
		Owner     string `json:"owner"`
		Token     int64  `json:"token"`
		TTL       string `json:"ttl,omitempty"`
		RequestID string `json:"request_id,omitempty"`
	}
	releaseBody struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
		Owner     string `json:"owner"`
		Token     int64  `json:"token"`
		RequestID string `json:"request_id,omitempty"`
	}
	revokeBody struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
		Actor     string `json:"actor"`
		Reason    string `json:"reason"`
		Token     int64  `json:"token,omitempty"`
		RequestID string `json:"request_id,omitempty"`
	}
)

// decodeJSON decodes exactly one JSON object from body into v, refusing
// unknown fields and anything after the object.
//
// JSON is UTF-8, and a string is Unicode: a body with bytes that are not
// UTF-8, or a \u escape of half a surrogate pair, is refused, since the
// decoder would read either as U+FFFD and the request would name a key or
// owner its sender never wrote (the Go API refuses such a key).
func decodeJSON(body []byte, v any) error {
	if !utf8.Valid(body) {
		return errors.New("body: not valid UTF-8: JSON text is UTF-8")
	}
	if bytes.HasPrefix(body, []byte("\ufeff")) {
		return errors.New("body: starts with a byte order mark (U+FEFF): send the JSON without it")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return errors.New("body: empty: want a JSON object")
		case errors.As(err, &syn):
			return fmt.Errorf("body: malformed JSON at byte %d: %v", syn.Offset, syn)
		case errors.As(err, &typ) && typ.Field == "":
			return fmt.Errorf("body: want a JSON %s, got %s", jsonKind(typ.Type), typ.Value)
		case errors.As(err, &typ):
			return fmt.Errorf("body: field %q: want a JSON %s, got %s", typ.Field, jsonKind(typ.Type), typ.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return fmt.Errorf("body: unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return fmt.Errorf("body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("body: more than one JSON value: want exactly one object")
	}
	if at := loneSurrogate(body); at >= 0 {
		return fmt.Errorf("body: the \\u escape at byte %d is half a UTF-16 surrogate pair: a string must be valid Unicode", at)
	}
	return exactMembers(json.NewDecoder(bytes.NewReader(body)), reflect.TypeOf(v).Elem(), "")
}

// jsonKind names, in JSON's terms, the kind of value that decodes into t:
// a client knows objects and integers, not the server's Go types.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "value"
}

// exactMembers reads one JSON value (well-formed, and decoded into a value
// of type t) from dec and refuses a member name that is not exactly one of
// t's JSON field names, or that an object gives twice: encoding/json
// matches "Owner" or "OWNER" to owner and keeps the last of two members of
// one name, so such a body would run as a request other than the one a
// proxy or another parser reads in it. path names the value in errors.
func exactMembers(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("body: %v", err)
	}
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch tok {
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := exactMembers(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case json.Delim('{'):
		fields := jsonFields(t)
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return fmt.Errorf("body: %v", err)
			}
			name, _ := tok.(string)
			full := name
			if path != "" {
				full = path + "." + name
			}
			ft, known := fields[name]
			switch {
			case fields != nil && !known:
				for f := range fields {
					if strings.EqualFold(f, name) {
						return fmt.Errorf("body: unknown field %q: names are case-sensitive; write %q", full, f)
					}
				}
				return fmt.Errorf("body: unknown field %q", full)
			case seen[name]:
				return fmt.Errorf("body: field %q given twice: give each field once", full)
			}
			seen[name] = true
			if err := exactMembers(dec, ft, full); err != nil {
				return err
			}
		}
	default:
		return nil // a scalar
	}
	if _, err := dec.Token(); err != nil { // the closing ] or }
		return fmt.Errorf("body: %v", err)
	}
	return nil
}

// jsonFields returns the JSON names of struct type t's fields and their
// types; nil when t is not a struct (any member name goes).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		out[cmp.Or(name, f.Name)] = f.Type
	}
	return out
}

// loneSurrogate returns the offset of the first \u escape in the JSON
// text body (well-formed: backslashes appear only in strings) of a UTF-16
// surrogate that is not half of a pair, or -1.
func loneSurrogate(body []byte) int {
	escaped := func(i int) (rune, bool) { // the code unit of a \u escape at i
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := escaped(i)
		if !ok {
			i++ // a one-character escape: skip the character
			continue
		}
		if utf16.IsSurrogate(r) {
			lo, ok := escaped(i + 6)
			if !ok || utf16.DecodeRune(r, lo) == unicode.ReplacementChar {
				return i
			}
			i += 6
		}
		i += 5
	}
	return -1
}

// requestID merges the body's request id with the Idempotency-Key header.
func requestID(body, header string) (string, error) {
	switch {
	case header == "":
		return body, nil
	case body == "" || body == header:
		return header, nil
	}
	return "", errors.New("request id: the Idempotency-Key header and the body's request_id differ")
}

// parseTTL reads a ttl field in the duration grammar of the CLI (package
// durations: "30s", "1h30m", "2d"). An empty one is 0: required by
// acquire (protocol's validation says so), "keep the lease's TTL" for
// renew. A TTL given as zero ("0s") is refused: only leaving it out
// keeps the lease's TTL.
func parseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := durations.Parse(s)
	if err != nil {
		if n, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			if secs := time.Duration(n * float64(time.Second)); secs < protocol.MinTTL || secs > protocol.MaxTTL {
				// The parser's hint (write Ns) would be refused in turn.
				return 0, fmt.Errorf("ttl: %q has no unit: write a duration from %s to %s, such as \"30s\" or \"15m\"",
					s, durations.Format(protocol.MinTTL), durations.Format(protocol.MaxTTL))
			}
		}
		return 0, fmt.Errorf("ttl: %w", err)
	}
	if d == 0 {
		return 0, fmt.Errorf("ttl: %s is no TTL: give one from %s to %s (a renewal without ttl keeps the lease's own)",
			s, durations.Format(protocol.MinTTL), durations.Format(protocol.MaxTTL))
	}
	return d, nil
}

func decodeAcquire(body []byte, idem string) (protocol.AcquireRequest, error) {
	var b acquireBody
	if err := decodeJSON(body, &b); err != nil {
		return protocol.AcquireRequest{}, err
	}
	id, err := requestID(b.RequestID, idem)
	if err != nil {
		return protocol.AcquireRequest{}, err
	}
	if b.TTL == "" {
		return protocol.AcquireRequest{RequestID: id}, errors.New("ttl: required, as a duration such as \"30s\", \"15m\" or \"2d\"")
	}
	ttl, err := parseTTL(b.TTL)
	if err != nil {
		return protocol.AcquireRequest{RequestID: id}, err
	}
	delay, err := wire.ParseOptDuration("lock_delay", b.LockDelay)
	if err != nil {
		return protocol.AcquireRequest{RequestID: id}, err
	}
	return protocol.AcquireRequest{Key: protocol.Key{Namespace: b.Namespace, Name: b.Key}, Owner: b.Owner, TTL: ttl, RequestID: id,
		LockDelay: delay}, nil
}

func decodeRenew(body []byte, idem string) (protocol.RenewRequest, error) {
	var b renewBody
	if err := decodeJSON(body, &b); err != nil {
		return protocol.RenewRequest{}, err
	}
	id, err := requestID(b.RequestID, idem)
	if err != nil {
		return protocol.RenewRequest{}, err
	}
	ttl, err := parseTTL(b.TTL)
	if err != nil {
		return protocol.RenewRequest{RequestID: id}, err
	}
	if b.Token == 0 && !hasToken(body) {
		return protocol.RenewRequest{RequestID: id}, errTokenRequired
	}
	return protocol.RenewRequest{Key: protocol.Key{Namespace: b.Namespace, Name: b.Key}, Owner: b.Owner, Token: b.Token,
		TTL: ttl, RequestID: id}, nil
}

// errTokenRequired refuses a renewal or release whose body has no token
// (or a null one): "must be positive, got 0" would send its sender
// looking for a 0 it never wrote.
var errTokenRequired = errors.New("token: required: the lease's token, as its acquire answered it")

// hasToken reports whether body, a JSON object that decodeJSON took,
// gives a token that is not null.
func hasToken(body []byte) bool {
	var b struct {
		Token *json.RawMessage `json:"token"`
	}
	return json.Unmarshal(body, &b) == nil && b.Token != nil
}

func decodeRelease(body []byte, idem string) (protocol.ReleaseRequest, error) {
	var b releaseBody
	if err := decodeJSON(body, &b); err != nil {
		return protocol.ReleaseRequest{}, err
	}
	id, err := requestID(b.RequestID, idem)
	if err != nil {
		return protocol.ReleaseRequest{}, err
	}
	if b.Token == 0 && !hasToken(body) {
		return protocol.ReleaseRequest{RequestID: id}, errTokenRequired
	}
	return protocol.ReleaseRequest{Key: protocol.Key{Namespace: b.Namespace, Name: b.Key}, Owner: b.Owner, Token: b.Token,
		RequestID: id}, nil
}

func decodeRevoke(body []byte, idem string) (protocol.RevokeRequest, error) {
	var b revokeBody
	if err := decodeJSON(body, &b); err != nil {
		return protocol.RevokeRequest{}, err
	}
	id, err := requestID(b.RequestID, idem)
	if err != nil {
		return protocol.RevokeRequest{}, err
	}
	return protocol.RevokeRequest{Key: protocol.Key{Namespace: b.Namespace, Name: b.Key}, Actor: b.Actor, Reason: b.Reason,
		Token: b.Token, RequestID: id}, nil
}

// query parses r's query string, refusing one that does not parse:
// net/http's URL.Query drops a malformed pair (a bad percent escape, a
// semicolon) without a word, and a filter dropped so widens the answer.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("query: %v: escape %% as %%25, & as %%26 and ; as %%3B in a value", err)
	}
	return q, nil
}

// queryParams checks that q holds only the allowed parameters, each once.
func queryParams(q url.Values, allowed ...string) error {
	for name, vs := range q {
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			return fmt.Errorf("query: unknown parameter %q (known: %s)", name, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return fmt.Errorf("query: parameter %q given %d times", name, len(vs))
		}
	}
	return nil
}

func parseBool(name, s string) (bool, error) {
	switch s {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, fmt.Errorf("%s: %q is not true or false", name, s)
}

// parseLimit reads a limit written as the API writes integers: decimal
// digits, as strconv.Itoa gives them ("" is 0, the default). Another
// spelling of a number (+5, 05, -0, blanks around it) is refused naming
// the one to write, as is anything else: a query value is read one way.
func parseLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("limit: %q is not an integer: write it in decimal digits, such as limit=100", s)
	}
	if strconv.Itoa(n) != s {
		hint := ""
		if strings.HasPrefix(s, " ") {
			hint = " (a + in a query string reads as a space)"
		}
		return 0, fmt.Errorf("limit: %q is not written in decimal digits alone%s: write limit=%d", s, hint, n)
	}
	return n, nil
}

// decodeList reads a list request from the path's namespace and the query.
func decodeList(namespace string, q url.Values, idem string) (protocol.ListRequest, error) {
	if err := queryParams(q, "prefix", "owner", "include_expired", "limit", "cursor"); err != nil {
		return protocol.ListRequest{}, err
	}
	inc, err := parseBool("include_expired", q.Get("include_expired"))
	if err != nil {
		return protocol.ListRequest{}, err
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return protocol.ListRequest{}, err
	}
	req := protocol.ListRequest{Namespace: namespace, Prefix: q.Get("prefix"), Owner: q.Get("owner"), IncludeExpired: inc,
		Limit: limit, Cursor: q.Get("cursor"), RequestID: idem}
	if errors.Is(listcursor.Check(req.Cursor, listScope(req), protocol.MaxNameLen), listcursor.ErrOtherList) {
		return req, listcursor.ErrOtherList
	}
	return req, nil
}

// listScope is the list req pages through, which the cursors answered to
// it are bound to (listcursor.Bind): a cursor of another namespace or
// other filters would start there after its name, leaving out the leases
// before it.
func listScope(req protocol.ListRequest) listcursor.Scope {
	return listcursor.Scope{Namespace: req.Namespace, Prefix: req.Prefix, Owner: req.Owner, IncludeExpired: req.IncludeExpired}
}

// decodeAudit reads an audit query and validates it.
func decodeAudit(q url.Values) (audit.Query, error) {
	if err := queryParams(q, "namespace", "key", "since", "limit", "cursor", "follow", "op", "owner", "order"); err != nil {
		return audit.Query{}, err
	}
	out := audit.Query{Namespace: q.Get("namespace"), Key: q.Get("key"), Cursor: q.Get("cursor"),
		Ops: audit.ParseOps(q.Get("op")), Owner: q.Get("owner")}
	var err error
	if s := q.Get("since"); s != "" {
		if out.Since, err = parseSince(s); err != nil {
			return audit.Query{}, err
		}
	}
	if out.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return audit.Query{}, err
	}
	if out.Follow, err = parseBool("follow", q.Get("follow")); err != nil {
		return audit.Query{}, err
	}
	if out.Newest, err = parseOrder(q.Get("order")); err != nil {
		return audit.Query{}, err
	}
	return out, out.Validate()
}

// parseSince reads the since parameter: a time, or a duration back from
// now. A query string reads + as a space, so the offset of an RFC 3339
// time sent unescaped (2026-01-02T15:04:05+01:00) arrives as " 01:00":
// the refusal then names the escape.
func parseSince(s string) (time.Time, error) {
	t, err := durations.ParseTime(s, time.Now())
	if err == nil {
		return t, nil
	}
	if strings.Contains(s, " ") {
		if _, perr := durations.ParseTime(strings.ReplaceAll(s, " ", "+"), time.Now()); perr == nil {
			return time.Time{}, fmt.Errorf("since: %q: a + in a query string reads as a space: write it %%2B (since=%s)",
				s, strings.ReplaceAll(s, " ", "%2B"))
		}
	}
	return time.Time{}, fmt.Errorf("since: %w", err)
}

// parseOrder reads the order parameter of GET /v1/audit: newest, or
// oldest (the default, also for "").
func parseOrder(s string) (newest bool, err error) {
	switch s {
	case "", "oldest":
		return false, nil
	case "newest":
		return true, nil
	}
	return false, fmt.Errorf("order: %q is neither newest nor oldest", s)
}

// splitLeasePath splits the escaped path after /v1/leases/ into the
// namespace (one segment, %2F for a slash) and the key (the rest, slashes
// and %2F alike). hasKey is false for a path that ends at the namespace.
func splitLeasePath(rest string) (namespace, key string, hasKey bool, err error) {
	nsEsc, keyEsc, hasKey := strings.Cut(rest, "/")
	if namespace, err = url.PathUnescape(nsEsc); err != nil {
		return "", "", false, errors.New("path: malformed percent-encoding in the namespace")
	}
	if key, err = url.PathUnescape(keyEsc); err != nil {
		return "", "", false, errors.New("path: malformed percent-encoding in the key")
	}
	return namespace, key, hasKey, nil
}
