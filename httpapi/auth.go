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
	"strconv"
	"strings"
	"unicode"

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

// MaxTokensFileBytes bounds a tokens file (16 MiB): [ParseTokens] and
// [LoadTokens] refuse a longer one, so that a --tokens path naming another
// file by mistake (a database, a log, /dev/zero) is not read whole into
// memory.
const MaxTokensFileBytes = 16 << 20

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
// token: shorter than 16 characters`; one that cannot be opened
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
// audit trail of every namespace at once). The prefix sha256: is read in
// any case (SHA256:HEX too); a token written ALGO:HEX of another hash
// algorithm (md5:, sha1:, SHA-256:, sha512/256:, sha3-256:, blake2b-256:...,
// with as many hex digits as its digest has) is refused, as no hash of it
// can be told from the token; any other NAME:HEX (deploy:HEX) is a plain
// token. A # starts a comment, to the end of the line, wherever it stands
// (the line TOKEN writer team#1 names the glob team); \# is the one way to
// put a # into a field: in the token it stands for #, and in a glob it is
// the glob grammar's quoted # (team\#1 names the namespace team#1), where
// the # of \\# (a quoted \) starts a comment. Blank lines are
// skipped; a UTF-8 byte order mark at the start is skipped; a line may be
// of any length, the file of at most [MaxTokensFileBytes]. Errors name the
// line and the field, never the token, and quote no field that may be one.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	// A bufio.Reader, not a Scanner: a line has no length limit but the
	// file's (a pasted certificate in a comment is a comment like any).
	lr := &io.LimitedReader{R: r, N: MaxTokensFileBytes + 1}
	br := bufio.NewReader(lr)
	line := 0
	var errs []error
	for {
		text, err := br.ReadString('\n')
		if lr.N <= 0 {
			return nil, fmt.Errorf("larger than %d MiB (%d bytes), the limit of a tokens file: is it the tokens file?",
				MaxTokensFileBytes>>20, MaxTokensFileBytes)
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("line %d: %w", line+1, err)
		}
		if err == io.EOF && text == "" {
			break
		}
		line++
		text = strings.TrimSuffix(strings.TrimSuffix(text, "\n"), "\r")
		if line == 1 {
			// A byte order mark, as some editors save UTF-8, is not part
			// of the first token.
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		fields := strings.Fields(uncomment(text))
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
	token := unquoteHash(fields[0])
	algo, hx, isHash := strings.Cut(token, ":")
	switch {
	case isHash && strings.EqualFold(algo, "sha256"):
		b, err := hex.DecodeString(hx)
		if err != nil || len(b) != sha256.Size {
			return tokenEntry{}, errors.New("token: sha256: want 64 hex digits")
		}
		copy(e.hash[:], b)
	case isHash && looksLikeHash(algo, hx):
		// algo is a known algorithm's name, never part of a secret.
		return tokenEntry{}, fmt.Errorf("token: written %s:HEX, a hash of %s, but only sha256:HEX names a token by its hash: "+
			"write the token's sha256:HEX, or the token itself", algo, algo)
	default:
		if len(token) < minPlainToken {
			return tokenEntry{}, fmt.Errorf("token: shorter than %d characters", minPlainToken)
		}
		e.hash = sha256.Sum256([]byte(token))
	}
	// The role is not quoted: on a line whose fields are out of order
	// (NAME TOKEN ROLE), it is the token.
	switch fields[1] {
	case "reader":
		e.role = RoleReader
	case "writer":
		e.role = RoleWriter
	case "admin":
		e.role = RoleAdmin
	default:
		return tokenEntry{}, errors.New("role: the second field is none of reader, writer or admin " +
			"(the line is TOKEN ROLE NS-GLOB[,NS-GLOB...])")
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

// uncomment returns text without its comment: from its first unquoted
// #, wherever it stands (*# starts one too). A \ quotes the character
// after it, so \# is part of its field and the # of \\# starts a comment,
// as the glob grammar reads them.
func uncomment(text string) string {
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++ // the quoted character, whatever it is
		case '#':
			return text[:i]
		}
	}
	return text
}

// unquoteHash returns a token field with each \# read as # (the one way
// to write a # in a token); any other \ is part of the token.
func unquoteHash(field string) string {
	var b strings.Builder
	for i := 0; i < len(field); i++ {
		if field[i] == '\\' && i+1 < len(field) {
			if field[i+1] != '#' {
				b.WriteByte('\\')
			}
			i++
		}
		b.WriteByte(field[i])
	}
	return b.String()
}

// hashHexLen is the length in hex digits of the digest of each hash
// algorithm a tokens file's first field may name as ALGO:HEX, by the name
// as [looksLikeHash] normalizes it (lower case, without '-', '_' or '/').
var hashHexLen = map[string]int{
	"md5":  32,
	"sha1": 40,
	// SHA-2, also written sha2-256 and so on, and SHA-512/t.
	"sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128,
	"sha2224": 56, "sha2256": 64, "sha2384": 96, "sha2512": 128,
	"sha512224": 56, "sha512256": 64,
	// SHA-3.
	"sha3224": 56, "sha3256": 64, "sha3384": 96, "sha3512": 128,
}

// looksLikeHash reports whether algo:hx reads as the digest of a hash
// algorithm: algo names one (md5, sha1, the SHA-2 and SHA-3 functions,
// BLAKE2b and BLAKE2s, in any case, with or without '-', '_' or '/':
// SHA-256, sha512/256, sha3_512, blake2b-256, blake2s256) and hx is as
// many hex digits as its digest has. A token so written is taken for a
// hash; any other NAME:HEX is a plain token (deploy:HEX, md5: of the wrong
// length).
func looksLikeHash(algo, hx string) bool {
	if hx == "" || strings.Trim(hx, "0123456789abcdefABCDEF") != "" {
		return false
	}
	name := strings.Map(func(c rune) rune {
		if c == '-' || c == '_' || c == '/' {
			return -1
		}
		return unicode.ToLower(c)
	}, algo)
	if n, ok := hashHexLen[name]; ok {
		return len(hx) == n
	}
	// BLAKE2b (digests up to 512 bits) and BLAKE2s (up to 256), of the
	// full length or of any whole number of bytes named after the name
	// (blake2b-256, blake2s128).
	for _, b := range []struct {
		name string
		bits int
	}{{"blake2b", 512}, {"blake2s", 256}} {
		rest, ok := strings.CutPrefix(name, b.name)
		if !ok {
			continue
		}
		bits := b.bits
		if rest != "" {
			n, err := strconv.Atoi(rest)
			if err != nil || rest[0] == '0' || n%8 != 0 || n > b.bits {
				return false
			}
			bits = n
		}
		return len(hx) == bits/4
	}
	return false
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
