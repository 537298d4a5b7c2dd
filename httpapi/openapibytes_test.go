package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestOpenAPILengthLimitsSayBytes: the store bounds a namespace, key,
// owner, actor, reason and request id in bytes of UTF-8, while JSON
// Schema's maxLength counts characters. A namespace of 128 "é" (256
// bytes) is valid by the document's maxLength of 128, and the server
// refuses it: a client checking its requests against /openapi.json sent
// it. So every maxLength of the document says, in its description, that
// the limit is in bytes.
func TestOpenAPILengthLimitsSayBytes(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	ns := strings.Repeat("é", 128)
	expect(t, "acquire in a namespace of 128 é", send(t, http.MethodPost, s.url+"/v1/acquire",
		`{"namespace":"`+ns+`","key":"k","owner":"o","ttl":"30s"}`), http.StatusBadRequest, "invalid")

	var doc any
	if err := json.Unmarshal([]byte(send(t, "GET", s.url+"/openapi.json", "").body), &doc); err != nil {
		t.Fatal(err)
	}
	found := 0
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["maxLength"]; ok {
				found++
				if d, _ := v["description"].(string); !strings.Contains(d, "bytes of UTF-8") {
					t.Errorf("%s: maxLength %v counts characters, the server bytes, and its description %q does not say \"bytes of UTF-8\"",
						path, v["maxLength"], d)
				}
			}
			for k, e := range v {
				walk(e, path+"/"+k)
			}
		case []any:
			for _, e := range v {
				walk(e, path+"/[]")
			}
		}
	}
	walk(doc, "")
	if found == 0 {
		t.Fatal("no maxLength in /openapi.json")
	}
}
