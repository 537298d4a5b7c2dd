// Package listcursor is the list cursor's codec, shared by protocol (which
// refuses a malformed cursor before a backend sees it) and backendkit
// (which makes and reads cursors for backends), so that cursors are
// portable between backends.
package listcursor

import (
	"encoding/base64"
	"errors"
	"strings"

	"github.com/leasestore/leasestore/internal/textfield"
)

const prefix = "c1."

// Encode returns the opaque cursor that resumes after the lease named name.
func Encode(name string) string {
	return prefix + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// Decode returns the name a cursor from [Encode] resumes after; names
// longer than maxName bytes are refused.
func Decode(cursor string, maxName int) (string, error) {
	rest, ok := strings.CutPrefix(cursor, prefix)
	if !ok {
		return "", errors.New("cursor: not a list cursor")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return "", errors.New("cursor: malformed")
	}
	name := string(b)
	if err := textfield.Validate("cursor", name, maxName); err != nil {
		return "", err
	}
	return name, nil
}
