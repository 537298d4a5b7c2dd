package httpapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The served OpenAPI document names the repository's licence, Apache-2.0,
// by its SPDX identifier, and the LICENSE file is that licence.
func TestOpenAPINamesTheLicense(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	var doc struct {
		Info struct {
			License struct {
				Name       string `json:"name"`
				Identifier string `json:"identifier"`
			} `json:"license"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(send(t, "GET", s.url+"/openapi.json", "").body), &doc); err != nil {
		t.Fatal(err)
	}
	if l := doc.Info.License; l.Identifier != "Apache-2.0" || l.Name == "" {
		t.Errorf("/openapi.json names the licence %+v, want the identifier Apache-2.0", l)
	}
	text, err := os.ReadFile(filepath.Join("..", "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "Apache License\n                           Version 2.0, January 2004") {
		t.Errorf("LICENSE is not the Apache License 2.0")
	}
}
