package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// componentRefs returns the components v refers to ("$ref":
// "#/components/KIND/NAME", as "KIND/NAME"), at any depth.
func componentRefs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" {
				if name, ok := strings.CutPrefix(s, "#/components/"); ok {
					out = append(out, name)
				}
				continue
			}
			out = append(out, componentRefs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, componentRefs(e)...)
		}
	}
	return out
}

// reachableSchemas returns the names of the component schemas that roots
// (components, "KIND/NAME") are or refer to, at any depth, sorted.
func reachableSchemas(components map[string]map[string]any, roots []string) []string {
	seen := map[string]bool{}
	var schemas []string
	for len(roots) > 0 {
		ref := roots[0]
		roots = roots[1:]
		if seen[ref] {
			continue
		}
		seen[ref] = true
		kind, name, _ := strings.Cut(ref, "/")
		if kind == "schemas" {
			schemas = append(schemas, name)
		}
		roots = append(roots, componentRefs(components[kind][name])...)
	}
	slices.Sort(schemas)
	return schemas
}

// TestOpenAPIAdditionalProperties pins what /openapi.json says of fields
// it does not list. Requests: the server refuses a field it does not know
// (400, "unknown field", also inside renew-many's renewals), so every
// object schema a request body uses says additionalProperties false, and
// a request with such a field does not validate. Responses: a later
// release may add fields, which the Go and Python clients ignore on
// purpose, so no object schema an answer uses forbids them, and a real
// answer with a field added (to the result and to its lease, to a page)
// validates against the document.
func TestOpenAPIAdditionalProperties(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	raw := send(t, "GET", s.url+"/openapi.json", "")
	var doc struct {
		Paths      map[string]map[string]any `json:"paths"`
		Components map[string]map[string]any `json:"components"`
	}
	if err := json.Unmarshal([]byte(raw.body), &doc); err != nil {
		t.Fatal(err)
	}
	var reqRoots, respRoots []string
	for _, item := range doc.Paths {
		for _, op := range item {
			m, ok := op.(map[string]any)
			if !ok {
				continue
			}
			reqRoots = append(reqRoots, componentRefs(m["requestBody"])...)
			respRoots = append(respRoots, componentRefs(m["responses"])...)
		}
	}
	// The event streams' data is named in their descriptions: answers too.
	respRoots = append(respRoots, "schemas/NotifyEvent")
	schemas := doc.Components["schemas"]
	objects := func(names []string) (out []string) {
		for _, n := range names {
			if sc, _ := schemas[n].(map[string]any); sc["type"] == "object" {
				out = append(out, n)
			}
		}
		return out
	}
	reqObjects := objects(reachableSchemas(doc.Components, reqRoots))
	respObjects := objects(reachableSchemas(doc.Components, respRoots))
	for _, name := range reqObjects {
		if slices.Contains(respObjects, name) {
			t.Errorf("schema %s is used by requests and responses alike: the rule of unknown fields differs between them", name)
		}
	}
	// Every object schema is a request's or a response's.
	for name := range schemas {
		if slices.Contains(objects([]string{name}), name) && !slices.Contains(reqObjects, name) && !slices.Contains(respObjects, name) {
			t.Errorf("schema %s is used by no request or response of the document's paths", name)
		}
	}
	if len(reqObjects) < 5 || len(respObjects) < 8 {
		t.Fatalf("request object schemas %v, response object schemas %v: the document's paths were not read", reqObjects, respObjects)
	}
	for _, n := range reqObjects {
		if ap, ok := schemas[n].(map[string]any)["additionalProperties"]; !ok || ap != false {
			t.Errorf("request schema %s: additionalProperties %v, want false (the server refuses a field it does not know)", n, ap)
		}
	}
	for _, n := range respObjects {
		if ap, ok := schemas[n].(map[string]any)["additionalProperties"]; ok && ap != true {
			t.Errorf("response schema %s: additionalProperties %v: a client may not be told that an answer never "+
				"gains a field (clients ignore fields they do not know); leave it out", n, ap)
		}
	}

	// The server refuses a field it does not know in every request body.
	for path, body := range map[string]string{
		"/v1/acquire":    `{"namespace":"ns","key":"k","owner":"o","ttl":"30s","colour":"red"}`,
		"/v1/renew":      `{"namespace":"ns","key":"k","owner":"o","token":1,"colour":"red"}`,
		"/v1/release":    `{"namespace":"ns","key":"k","owner":"o","token":1,"colour":"red"}`,
		"/v1/revoke":     `{"namespace":"ns","key":"k","actor":"a","reason":"r","colour":"red"}`,
		"/v1/renew-many": `{"renewals":[{"namespace":"ns","key":"k","owner":"o","token":1,"colour":"red"}]}`,
	} {
		m := expect(t, "POST "+path+" with an unknown field", send(t, "POST", s.url+path, body), 400, "invalid")
		if msg, _ := m["message"].(string); !strings.Contains(msg, `unknown field "`) || !strings.Contains(msg, `colour"`) {
			t.Errorf("POST %s with an unknown field: message %q does not name it", path, msg)
		}
	}
	if m := expect(t, "POST /v1/renew-many with an unknown field beside renewals", send(t, "POST", s.url+"/v1/renew-many",
		`{"renewals":[{"namespace":"ns","key":"k","owner":"o","token":1}],"colour":"red"}`), 400, "invalid"); !strings.Contains(m["message"].(string), `"colour"`) {
		t.Errorf("renew-many: message %q does not name the unknown field", m["message"])
	}

	// Against the document: a real answer with fields added validates; a
	// request with one does not.
	d, err := libopenapi.NewDocument([]byte(raw.body))
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	exchange := func(method, path, body string) (*http.Request, *http.Response, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		} else {
			req.Body = nil
		}
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
		req.Body = io.NopCloser(strings.NewReader(body))
		return req, resp, m
	}
	validates := func(req *http.Request, resp *http.Response, m map[string]any) (bool, string) {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		ok, errs := v.ValidateHttpResponse(req, resp)
		var reasons []string
		for _, e := range errs {
			for _, ve := range e.SchemaValidationErrors {
				reasons = append(reasons, ve.FieldPath+": "+ve.Reason)
			}
			if len(e.SchemaValidationErrors) == 0 {
				reasons = append(reasons, e.Message+": "+e.Reason)
			}
		}
		return ok, strings.Join(reasons, "; ")
	}
	acquire := `{"namespace":"ns","key":"k","owner":"o","ttl":"30s"}`
	req, resp, m := exchange("POST", "/v1/acquire", acquire)
	if ok, why := validates(req, resp, m); !ok || resp.StatusCode != 200 {
		t.Fatalf("the acquire's answer as sent (HTTP %d) does not validate: %s", resp.StatusCode, why)
	}
	m["colour"] = "blue"
	m["lease"].(map[string]any)["colour"] = "blue"
	if ok, why := validates(req, resp, m); !ok {
		t.Errorf("an acquire's answer with a field added to the result and its lease does not validate: "+
			"the document forbids what clients must accept: %s", why)
	}
	req, resp, m = exchange("GET", "/v1/leases/ns", "")
	m["colour"] = "blue"
	m["leases"].([]any)[0].(map[string]any)["colour"] = "blue"
	if ok, why := validates(req, resp, m); !ok {
		t.Errorf("a list page with a field added to the page and its lease does not validate: %s", why)
	}
	req, resp, m = exchange("GET", "/v1/audit?namespace=ns", "")
	m["colour"] = "blue"
	m["records"].([]any)[0].(map[string]any)["colour"] = "blue"
	if ok, why := validates(req, resp, m); !ok {
		t.Errorf("an audit page with a field added to the page and its record does not validate: %s", why)
	}
	req, resp, m = exchange("GET", "/healthz", "")
	m["colour"] = "blue"
	if ok, why := validates(req, resp, m); !ok {
		t.Errorf("a probe's answer with a field added does not validate: %s", why)
	}
	bad, err := http.NewRequest("POST", s.url+"/v1/acquire", strings.NewReader(strings.Replace(acquire, "}", `,"colour":"red"}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	bad.Header.Set("Content-Type", "application/json")
	if ok, _ := v.ValidateHttpRequest(bad); ok {
		t.Errorf("an acquire request with a field the server does not know validates against the document, which the server refuses")
	}
}
