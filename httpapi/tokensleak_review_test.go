package httpapi_test

import (
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
)

// ParseTokens: "Errors name the line, never the token" (an error at a
// SIGHUP reload goes to serve's log). A line that labels its token first,
// `NAME TOKEN ROLE` (a common layout of secrets files; the glob
// forgotten), is refused quoting its second field as the role: the token
// itself, in the error and so in the log.
func TestTokensFileErrorsNeverNameTheToken(t *testing.T) {
	t.Parallel()
	const secret = "7f3d9c2a51e84b06a9d4c0ffee"
	line := "ci-deploy-production " + secret + " writer"
	_, err := httpapi.ParseTokens(strings.NewReader(line + "\n"))
	if err == nil {
		t.Fatalf("tokens file line %q loaded", line)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("tokens file line %q: the error names the token %s: %v", line, secret, err)
	}
}
