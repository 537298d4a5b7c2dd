package httpapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// A token that holds a control character inside it, which no header can
// carry, is a bad token: NewClient refuses it (protocol.ErrUnauthenticated,
// so leasectl exits 7), never quoting it, rather than every request
// reporting the server unreachable.
func TestClientRefusesATokenNoHeaderCanCarry(t *testing.T) {
	t.Parallel()
	const secret = "run-writer\r\n0123456789"
	_, err := httpapi.NewClient("http://127.0.0.1:1", &httpapi.ClientConfig{Token: secret})
	if !errors.Is(err, protocol.ErrUnauthenticated) {
		t.Fatalf("NewClient with a token holding CR LF inside: %v; want it refused as a bad token (protocol.ErrUnauthenticated)", err)
	}
	if strings.Contains(err.Error(), "0123456789") || strings.Contains(err.Error(), "run-writer") {
		t.Fatalf("NewClient with a token holding CR LF inside: %v: the error quotes the token", err)
	}
}
