package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/leasestore/leasestore/internal/textfield"
)

// Length limits, in bytes, for the text fields of the protocol.
const (
	MaxNamespaceLen = 128
	MaxNameLen      = 512
	MaxOwnerLen     = 256
	MaxRequestIDLen = 128
	MaxReasonLen    = 1024
)

// ValidateOwner reports whether owner may hold a lease: what an acquire
// refuses as invalid (empty, longer than [MaxOwnerLen] bytes, not UTF-8,
// a control or invisible formatting character), in an error that starts
// "owner: ". Check a worker's name with it before opening a store; the
// scheduler and the backends check it again.
func ValidateOwner(owner string) error {
	return textfield.Validate("owner", owner, MaxOwnerLen)
}

// KeyEncodingVersion is the version of [Key.Encode]'s canonical form.
const KeyEncodingVersion = 1

// DefaultNamespace is the namespace leasectl uses when none is given.
const DefaultNamespace = "default"

// Key names a lease: a namespace (a tenant, a service, a kind of work) and a
// name within it. The zero Key is invalid. Key is a comparable value type.
type Key struct {
	Namespace string
	Name      string
}

// NewKey returns the key (namespace, name) after validating it.
func NewKey(namespace, name string) (Key, error) {
	k := Key{Namespace: namespace, Name: name}
	return k, k.Validate()
}

// Validate reports whether k is well formed: both parts non-empty, valid
// UTF-8, free of control and invisible formatting characters, and within [MaxNamespaceLen] and
// [MaxNameLen] bytes.
func (k Key) Validate() error {
	if err := textfield.Validate("namespace", k.Namespace, MaxNamespaceLen); err != nil {
		return err
	}
	return textfield.Validate("key", k.Name, MaxNameLen)
}

// String returns "namespace/name" for messages, logs and leasectl's
// output; [KeyFromString] reads it back. The namespace part escapes '%' as
// "%25" and '/' as "%2F" (as an HTTP path segment does), so a namespace
// holding either still prints a key of its own; any other namespace prints
// as written. The name follows the first '/' verbatim. It is not the
// canonical encoding: use [Key.Encode] for storage.
func (k Key) String() string { return EscapeNamespace(k.Namespace) + "/" + k.Name }

// EscapeNamespace returns ns as the namespace part of [Key.String]: '%' as
// "%25" and '/' as "%2F", everything else as written.
func EscapeNamespace(ns string) string {
	if !strings.ContainsAny(ns, "%/") {
		return ns
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(ns)
}

// UnescapeNamespace reads the namespace part of [Key.String] back: "%2F"
// (or "%2f") is '/' and "%25" is '%', the only escapes EscapeNamespace
// writes. Any other '%' is an error rather than a byte of hex, so that a
// KEY written for a release that took the namespace as written
// ("team%20a/job") is refused instead of naming another key ("team a").
func UnescapeNamespace(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch esc := s[i+1 : min(i+3, len(s))]; esc {
		case "25":
			b.WriteByte('%')
		case "2F", "2f":
			b.WriteByte('/')
		default:
			return "", fmt.Errorf("key: namespace %q: %q is no escape of a key's namespace: write '%%' as %%25 and '/' as %%2F (or give the namespace with -n)", s, "%"+esc)
		}
		i += 2
	}
	return b.String(), nil
}

// Encode returns the canonical, versioned encoding of k:
//
//	v1:<byte length of namespace>:<namespace><name>
//
// The length prefix makes the encoding injective (no two keys share one) and
// [ParseKey] inverts it exactly. Encode does not validate k.
func (k Key) Encode() string {
	return "v1:" + strconv.Itoa(len(k.Namespace)) + ":" + k.Namespace + k.Name
}

// KeyFromString parses the "namespace/name" form that [Key.String] prints
// and leasectl shows, and validates the result. The namespace ends at the
// first '/' and is unescaped ("%2F" is '/', "%25" is '%': see
// [UnescapeNamespace]); the name is the rest, as written ("scans/10.0.0.0/24"
// is namespace "scans", name "10.0.0.0/24"; "a%2Fb/c" is namespace "a/b",
// name "c"). KeyFromString(k.String()) is k for every valid key.
func KeyFromString(s string) (Key, error) {
	nsText, name, ok := strings.Cut(s, "/")
	if !ok {
		return Key{}, fmt.Errorf("key: %q has no namespace: write namespace/name, as in %s/%s", s, DefaultNamespace, s)
	}
	switch {
	case nsText == "":
		return Key{}, fmt.Errorf("key %q: its namespace is empty (nothing before the first '/'): write namespace/name", s)
	case name == "":
		return Key{}, fmt.Errorf("key %q: its name is empty (nothing after the first '/'): write namespace/name", s)
	}
	ns, err := UnescapeNamespace(nsText)
	if err != nil {
		return Key{}, err
	}
	k := Key{Namespace: ns, Name: name}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// ParseKey decodes the canonical encoding produced by [Key.Encode]
// ("v1:..."), not the "namespace/name" form people see (use
// [KeyFromString] for that), and validates the result. Encodings of
// unknown versions are refused.
func ParseKey(s string) (Key, error) {
	rest, ok := strings.CutPrefix(s, "v1:")
	if !ok {
		return Key{}, fmt.Errorf("key: unknown encoding %.12q: want prefix \"v1:\"", s)
	}
	digits, body, ok := strings.Cut(rest, ":")
	if !ok || digits == "" || len(digits) > 4 || (digits[0] == '0') {
		return Key{}, errors.New("key: malformed length prefix")
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > len(body) {
		return Key{}, errors.New("key: malformed length prefix")
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return Key{}, errors.New("key: malformed length prefix")
		}
	}
	k := Key{Namespace: body[:n], Name: body[n:]}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}
