package httpapi

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/leasestore/leasestore/internal/nsglob"
	"github.com/leasestore/leasestore/internal/textfield"
	"github.com/leasestore/leasestore/protocol"
)

// Role is what a bearer token may do.
type Role int

// The roles of a tokens file, each allowing what the one before allows.
const (
	RoleReader Role = iota + 1 // get, list, audit
	RoleWriter                 // and acquire, renew, release
	RoleAdmin                  // and revoke
)

// String returns the role as a tokens file writes it (reader, writer,
// admin).
func (r Role) String() string {
	switch r {
	case RoleReader:
		return "reader"
	case RoleWriter:
		return "writer"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// opRole is the least role that may run op.
func opRole(op protocol.Op) Role {
	switch op {
	case protocol.OpAcquire, protocol.OpRenew, protocol.OpRelease:
		return RoleWriter
	case protocol.OpRevoke:
		return RoleAdmin
	}
	return RoleReader
}

// minPlainToken is the shortest bearer token a tokens file may name in
// plain text: a shorter one could be guessed.
const minPlainToken = 16

// Tokens is a parsed tokens file: bearer tokens, each with a role and the
// namespaces it may act in. It is immutable and safe for concurrent use;
// reloading makes a new one.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	hash  [sha256.Size]byte // SHA-256 of the bearer token
	role  Role
	globs []string
	line  int
}

// Principal is an authenticated caller: the role and namespaces of the
// tokens file line that matched its token (never the token itself).
type Principal struct {
	Role  Role
	Globs []string // the line's namespace globs (docs/http-api.md, "Namespace globs")
	Line  int      // the line of the tokens file
}

// Len returns how many tokens t holds.
func (t *Tokens) Len() int { return len(t.entries) }

// LoadTokens reads a tokens file (see [ParseTokens]). Its errors name the
// file once, quoted, as in `tokens file "/etc/leasestore/tokens": line 2:
// role "boss": want reader, writer or admin`; one that cannot be opened
// wraps the cause (errors.Is(err, fs.ErrNotExist) holds for a missing file).
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named below, once
		}
		return nil, fmt.Errorf("tokens file %q: %w", path, err)
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("tokens file %q: %w", path, err)
	}
	return t, nil
}

// ParseTokens reads a tokens file: one token a line,
//
//	TOKEN ROLE NS-GLOB[,NS-GLOB...]
//
// where TOKEN is the bearer token itself (at least 16 characters) or
// sha256:HEX, the SHA-256 of it in hex; ROLE is reader (get, list, audit),
// writer (and acquire, renew, release) or admin (and revoke); and each
// NS-GLOB names the namespaces the token may act in, where * matches any run
// of characters ("*" is every namespace, and only "*" lets a token read the
// audit trail of every namespace at once). # starts a comment, to the end of
// the line; blank lines are skipped; a UTF-8 byte order mark at the start
// is skipped. Errors name the line, never the token.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	line := 0
	var errs []error
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			// A byte order mark, as some editors save UTF-8, is not part
			// of the first token.
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		text, _, _ = strings.Cut(text, "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		e, err := parseTokenLine(fields, line)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		if first, dup := seen[e.hash]; dup {
			errs = append(errs, fmt.Errorf("line %d: the same token as line %d", line, first))
			continue
		}
		seen[e.hash] = line
		t.entries = append(t.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(t.entries) == 0 {
		return nil, errors.New("no tokens: want lines of TOKEN ROLE NS-GLOB[,NS-GLOB...]")
	}
	return t, nil
}

func parseTokenLine(fields []string, line int) (tokenEntry, error) {
	if len(fields) != 3 {
		return tokenEntry{}, fmt.Errorf("%d fields, want TOKEN ROLE NS-GLOB[,NS-GLOB...]", len(fields))
	}
	e := tokenEntry{line: line}
	if hx, ok := strings.CutPrefix(fields[0], "sha256:"); ok {
		b, err := hex.DecodeString(hx)
		if err != nil || len(b) != sha256.Size {
			return tokenEntry{}, errors.New("sha256: want 64 hex digits")
		}
		copy(e.hash[:], b)
	} else {
		if len(fields[0]) < minPlainToken {
			return tokenEntry{}, fmt.Errorf("token: shorter than %d characters", minPlainToken)
		}
		e.hash = sha256.Sum256([]byte(fields[0]))
	}
	switch fields[1] {
	case "reader":
		e.role = RoleReader
	case "writer":
		e.role = RoleWriter
	case "admin":
		e.role = RoleAdmin
	default:
		return tokenEntry{}, fmt.Errorf("role %q: want reader, writer or admin", fields[1])
	}
	for g := range strings.SplitSeq(fields[2], ",") {
		if g == "" {
			return tokenEntry{}, errors.New("namespace globs: an empty glob")
		}
		if err := textfield.Validate("namespace glob", g, protocol.MaxNamespaceLen); err != nil {
			return tokenEntry{}, err
		}
		if err := nsglob.Validate(g); err != nil {
			return tokenEntry{}, err
		}
		e.globs = append(e.globs, g)
	}
	return e, nil
}

// authenticate returns the principal of a bearer token, or false. Every
// entry is compared, in constant time, with the token's SHA-256, so the
// time taken says nothing about which entry or how much of one matched.
func (t *Tokens) authenticate(token string) (Principal, bool) {
	if token == "" {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	e := t.entries[found]
	return Principal{Role: e.role, Globs: e.globs, Line: e.line}, true
}

// allows reports whether p may run op in namespace. namespace "" (an audit
// read of every namespace) is allowed only to a principal with glob "*".
func (p Principal) allows(op protocol.Op, namespace string) bool {
	if p.Role < opRole(op) {
		return false
	}
	for _, g := range p.Globs {
		if g == "*" || (namespace != "" && nsglob.Match(g, namespace)) {
			return true
		}
	}
	return false
}
