package wire

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/protocol"
)

// genericMissing is the check Decode replaced, kept as its reference: the
// first member that the JSON text data, an answer decoded into shape, lacks
// though shape's type requires it, or has null though it is not a pointer
// (the OpenAPI document's nullable members; an array's items are never
// null), found by decoding data a second time into generic values and
// walking the type.
func genericMissing(data []byte, shape any) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	return genericMissingAt(v, reflect.TypeOf(shape), "")
}

func genericMissingAt(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for f := range t.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			name = cmp.Or(name, f.Name)
			member, ok := obj[name]
			switch {
			case !ok && strings.Contains(opts, "omitempty"):
			case !ok && path == "":
				return fmt.Errorf("no field %q", name)
			case !ok:
				return fmt.Errorf("%s: no field %q", path, name)
			case member == nil && !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer && path == "":
				return fmt.Errorf("field %q is null", name)
			case member == nil && !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer:
				return fmt.Errorf("%s: field %q is null", path, name)
			default:
				if err := genericMissingAt(member, f.Type, strings.TrimPrefix(path+"."+name, ".")); err != nil {
					return err
				}
			}
		}
	case reflect.Slice:
		items, _ := v.([]any)
		for i, item := range items {
			if item == nil && t.Elem().Kind() != reflect.Pointer {
				return fmt.Errorf("%s[%d] is null", path, i)
			}
			if err := genericMissingAt(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeShapes are the shapes Decode reads, each beside the type that
// mirrors it.
var decodeShapes = []struct {
	shape, mirror reflect.Type
	new           func() any
}{
	{reflect.TypeFor[Lease](), reflect.TypeFor[leaseIn](), nil},
	{reflect.TypeFor[Result](), reflect.TypeFor[resultIn](), func() any { return new(Result) }},
	{reflect.TypeFor[Record](), reflect.TypeFor[recordIn](), func() any { return new(Record) }},
	{reflect.TypeFor[ListPage](), reflect.TypeFor[listPageIn](), func() any { return new(ListPage) }},
	{reflect.TypeFor[AuditPage](), reflect.TypeFor[auditPageIn](), func() any { return new(AuditPage) }},
	{reflect.TypeFor[NamespacePage](), reflect.TypeFor[namespacePageIn](), func() any { return new(NamespacePage) }},
	{reflect.TypeFor[RenewManyPage](), reflect.TypeFor[renewManyPageIn](), func() any { return new(RenewManyPage) }},
}

// TestDecodeMirrors: each type Decode decodes into has the members of the
// shape it mirrors, in its order, each required one (no omitempty) a
// member (or, for an array, a slice), each optional one as in the shape.
// A member added to a shape and not to its mirror would go unread.
func TestDecodeMirrors(t *testing.T) {
	t.Parallel()
	for _, s := range decodeShapes {
		var want, got []string
		for f := range s.shape.Fields() {
			want = append(want, f.Tag.Get("json"))
		}
		for f := range s.mirror.Fields() {
			got = append(got, f.Tag.Get("json"))
			_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			sf, _ := s.shape.FieldByName(f.Name)
			switch {
			case strings.Contains(opts, "omitempty") && f.Type != sf.Type:
				t.Errorf("%s.%s: %s, want %s as in %s", s.mirror, f.Name, f.Type, sf.Type, s.shape)
			case !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Slice &&
				!strings.HasPrefix(f.Type.Name(), "member["):
				t.Errorf("%s.%s is required but a %s, not a member", s.mirror, f.Name, f.Type)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s has members %q, %s %q", s.mirror, got, s.shape, want)
		}
	}
}

// decodeSeeds are answers as servers send them, and each of them without
// one member, for every member at any depth.
func decodeSeeds(t testing.TB) [][]byte {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	l := protocol.Lease{Key: protocol.Key{Namespace: "ns", Name: "k"}, Owner: "o", Token: 1<<53 + 1, AcquiredAt: at,
		ExpiresAt: at.Add(time.Minute), Version: protocol.LeaseFormatVersion, LockDelay: time.Second}
	rec := FromRecord(audit.Record{ID: 7, At: at, Op: protocol.OpAcquire, Namespace: "ns", Key: "k", Owner: "o", Token: 3,
		RequestID: "r", Actor: "o", Status: protocol.StatusAcquired, Version: audit.RecordFormatVersion})
	rec.ExpiresAt = OptTime(at)
	answers := []any{
		FromResult(protocol.Result{Status: protocol.StatusAcquired, RequestID: "r", Lease: &l}, "m"),
		FromResult(protocol.Result{Status: protocol.StatusNotFound, RequestID: "r"}, "none"),
		rec,
		FromList(protocol.ListResult{Status: protocol.StatusFound, Leases: []protocol.Lease{l, l}, NextCursor: "c"}),
		FromList(protocol.ListResult{Status: protocol.StatusFound}),
		AuditPage{Status: "found", Records: []Record{rec, rec}, NextCursor: "a1.7", HeldBack: true, FollowCursor: "a1.8"},
		NamespacePage{Status: "found", Namespaces: []string{"a", "b"}},
		RenewManyPage{Status: "found", Results: []Result{
			FromResult(protocol.Result{Status: protocol.StatusRenewed, RequestID: "r1", Lease: &l}, ""),
			FromResult(protocol.Result{Status: protocol.StatusNotFound, RequestID: "r2"}, "gone")}},
		Error{Status: "unavailable", Message: "down"},
	}
	var seeds [][]byte
	for _, a := range answers {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
		for i := 0; ; i++ {
			without, ok := withoutMember(t, b, i)
			if !ok {
				break
			}
			seeds = append(seeds, without)
		}
	}
	return append(seeds, []byte(`null`), []byte(` null `), []byte(`{"leases":null,"records":null,"results":null,"namespaces":null}`),
		[]byte(`{"status":"found","leases":[null,{}],"next_cursor":""}`), []byte(`{"status":"found","results":[null],"lease":null}`),
		[]byte(`{"status":"found","namespaces":["a",null,""]}`), []byte(`{"status":"found","namespaces":["",""]}`),
		[]byte(`{"status":"found","leases":null,"records":[],"results":[],"namespaces":[],"next_cursor":null}`),
		[]byte(`{"status":null,"replayed":null,"request_id":null,"message":null,"lease":{"token":null,"acquired_at":null}}`),
		[]byte(`{"status":"\u0066ound","request_id":"r\u00e9","message":"m","lease":{"owner":"é","token":-0}}`),
		[]byte("{\"status\":\"found\",\"message\":\"\xff\",\"lease\":{\"key\":\"a\xc3\"}}"),
		[]byte(`{"status":"found","lease":{"token":"7"}}`), []byte(`{"status":"found","lease":{"version":1.0}}`),
		[]byte(`{"status":"found","lease":{"token":1e400}}`), []byte(`{"status":"found","replayed":"yes"}`),
		[]byte(`{"status":"found","lease":5}`), []byte(`[]`), []byte(`"found"`), []byte(`{`))
}

// withoutMember returns the JSON text b without its i-th object member
// (counting depth first), or false when it has fewer.
func withoutMember(t testing.TB, b []byte, i int) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	n := 0
	var drop func(v any) bool
	drop = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range v {
					if !yield(k) {
						return
					}
				}
			})
			for _, k := range keys {
				if n == i {
					delete(v, k)
					return true
				}
				n++
				if drop(v[k]) {
					return true
				}
			}
		case []any:
			for _, item := range v {
				if drop(item) {
					return true
				}
			}
		}
		return false
	}
	if !drop(v) {
		return nil, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out, true
}

// FuzzDecode: Decode reads whatever a server sends as json.Unmarshal
// does (an error for the same texts, the same values otherwise) and names
// the member absent that the generic check named, the same text, or none
// when it named none. Texts with a key twice in an object, or a key that
// matches a member's name only case-insensitively, are left out of the
// comparison of absent members: there json.Unmarshal reads (merges, or
// matches) a member that the generic check, by the last key of each name
// and exact names, did not see, and Decode, which sees what json.Unmarshal
// reads, accepts it. So are texts the generic check could not decode (a
// number beyond float64 in a member the shape does not have).
func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		different := keysReadDifferently(data)
		for _, s := range decodeShapes {
			if s.new == nil {
				continue
			}
			want, got := s.new(), s.new()
			wantErr := json.Unmarshal(data, want)
			absent, err := Decode(data, got)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("Decode(%s) into %s: error %v; json.Unmarshal's %v", data, s.shape, err, wantErr)
			}
			if err != nil {
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Decode(%s) into %s: %+v; json.Unmarshal's %+v", data, s.shape, got, want)
			}
			var generic any
			if different || json.Unmarshal(data, &generic) != nil {
				continue // a member the shape does not have that a float64 cannot hold: the generic check failed
			}
			if wantAbsent := genericMissing(data, want); fmt.Sprint(absent) != fmt.Sprint(wantAbsent) {
				t.Fatalf("Decode(%s) into %s: absent %v; the generic check's %v", data, s.shape, absent, wantAbsent)
			}
		}
	})
}

// keysReadDifferently reports whether data, at any depth, has an object
// with a key twice or a key that is a member's name but for case (see
// FuzzDecode).
func keysReadDifferently(data []byte) bool {
	names := map[string]bool{}
	for _, s := range decodeShapes {
		for f := range s.shape.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			names[name] = true
		}
	}
	type frame struct {
		object, key bool
		seen        map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false // the end, or not JSON: json.Unmarshal tells
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.object && top.key {
			if top.seen[k] {
				return true
			}
			top.seen[k] = true
			for name := range names {
				if k != name && strings.EqualFold(k, name) {
					return true
				}
			}
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true, seen: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return false
			}
			top = stack[len(stack)-1]
		}
		if top != nil && top.object {
			top.key = true // a member's value ended
		}
	}
}

// TestDecodeReadsAMemberAsJSONDoes: a member whose key differs from the
// name only in case is read by json.Unmarshal, and so counts as present
// (the generic check, by exact names, named it absent though its value
// was read).
func TestDecodeReadsAMemberAsJSONDoes(t *testing.T) {
	t.Parallel()
	var r Result
	absent, err := Decode([]byte(`{"Status":"found","replayed":false,"request_id":"r","message":"","lease":null}`), &r)
	if err != nil || absent != nil || r.Status != "found" {
		t.Fatalf("Decode: %+v, absent %v, %v; want status found read, nothing absent", r, absent, err)
	}
}

// TestDecodeNullableAsOpenAPI: Decode takes a shape's pointer members for
// the nullable ones and refuses null in any other required member; the
// OpenAPI document (httpapi's openapi.json) must say the same of each.
func TestDecodeNullableAsOpenAPI(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, s := range decodeShapes {
		schema, ok := doc.Components.Schemas[s.shape.Name()]
		if !ok {
			t.Errorf("openapi.json has no schema %s", s.shape.Name())
			continue
		}
		for f := range s.shape.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if strings.Contains(opts, "omitempty") {
				continue
			}
			if !slices.Contains(schema.Required, name) {
				t.Errorf("%s.%s is required in Go, not in openapi.json", s.shape.Name(), name)
			}
			var p struct {
				Type  any `json:"type"`
				OneOf []struct {
					Type string `json:"type"`
				} `json:"oneOf"`
			}
			if err := json.Unmarshal(schema.Properties[name], &p); err != nil {
				t.Fatalf("%s.%s: %v", s.shape.Name(), name, err)
			}
			nullable := false
			if types, ok := p.Type.([]any); ok {
				nullable = slices.Contains(types, any("null"))
			}
			for _, o := range p.OneOf {
				nullable = nullable || o.Type == "null"
			}
			if pointer := f.Type.Kind() == reflect.Pointer; pointer != nullable {
				t.Errorf("%s.%s: a %s in Go (nullable: %t), nullable in openapi.json: %t", s.shape.Name(), name, f.Type, pointer, nullable)
			}
		}
	}
}
