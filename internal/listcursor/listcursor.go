// Package listcursor is the list cursor's codec, shared by protocol (which
// refuses a malformed cursor before a backend sees it), backendkit (which
// makes and reads cursors for backends, so that cursors are portable
// between backends) and httpapi (which binds the cursors it answers to
// their list).
//
// A cursor names the lease a page ended at: "c1." and the name, base64url.
// A bound cursor ("c2.") carries a tag of its list (namespace and filters)
// before the name, so that it is refused by another list, which would
// otherwise start after that name and leave out the leases before it
// without a word. Both forms resume after the name; only a bound one is
// checked against its list ([Check]), so the cursors of releases before
// bound ones still work.
package listcursor

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/leasestore/leasestore/internal/textfield"
)

const (
	prefix      = "c1."
	boundPrefix = "c2."
	tagLen      = 8 // bytes of a bound cursor's list tag
)

// Scope is the list a cursor belongs to: the namespace and the filters of
// the list that made it. The page size is not part of it: a list may go on
// with another limit.
type Scope struct {
	Namespace      string
	Prefix         string
	Owner          string
	IncludeExpired bool
}

// tag is the first tagLen bytes of a hash of s. The text fields cannot
// hold NUL (a control character), so joining them with NUL is unambiguous.
func (s Scope) tag() []byte {
	inc := "0"
	if s.IncludeExpired {
		inc = "1"
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{"leasestore list", s.Namespace, s.Prefix, s.Owner, inc}, "\x00")))
	return sum[:tagLen]
}

// ErrOtherList is the error of a bound cursor given to a list other than
// its own.
var ErrOtherList = errors.New("cursor: from another list (another namespace, prefix, owner or include_expired): " +
	"a cursor goes on only with the list that gave it; list again without a cursor")

// Encode returns the opaque cursor that resumes after the lease named name.
func Encode(name string) string {
	return prefix + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// Bind returns cursor (from [Encode] or Bind) bound to the list s: it
// resumes after the same name, and [Check] refuses it for any other list.
// "" stays "". A cursor that does not decode is Decode's error.
func Bind(cursor string, s Scope, maxName int) (string, error) {
	if cursor == "" {
		return "", nil
	}
	_, name, err := split(cursor, maxName)
	if err != nil {
		return "", err
	}
	return boundPrefix + base64.RawURLEncoding.EncodeToString(append(s.tag(), name...)), nil
}

// Check returns [ErrOtherList] for a bound cursor of a list other than s,
// Decode's error for a cursor that does not decode, and nil otherwise (an
// unbound cursor, of any list, and "").
func Check(cursor string, s Scope, maxName int) error {
	if cursor == "" {
		return nil
	}
	tag, _, err := split(cursor, maxName)
	switch {
	case err != nil:
		return err
	case tag != nil && !bytes.Equal(tag, s.tag()):
		return ErrOtherList
	}
	return nil
}

// Decode returns the name a cursor from [Encode] or [Bind] resumes after
// (of any list: see [Check]); names longer than maxName bytes are refused.
func Decode(cursor string, maxName int) (string, error) {
	_, name, err := split(cursor, maxName)
	return name, err
}

// split returns a cursor's list tag (nil for an unbound one) and name.
func split(cursor string, maxName int) (tag []byte, name string, err error) {
	rest, ok := strings.CutPrefix(cursor, prefix)
	bound := false
	if !ok {
		if rest, ok = strings.CutPrefix(cursor, boundPrefix); !ok {
			return nil, "", errors.New("cursor: not a list cursor")
		}
		bound = true
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || (bound && len(b) < tagLen) {
		return nil, "", errors.New("cursor: malformed")
	}
	if bound {
		tag, b = b[:tagLen], b[tagLen:]
	}
	name = string(b)
	if err := textfield.Validate("cursor", name, maxName); err != nil {
		return nil, "", err
	}
	return tag, name, nil
}
