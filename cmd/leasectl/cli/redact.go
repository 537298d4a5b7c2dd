package cli

import (
	"io"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// mask replaces a password wherever leasectl prints one.
const mask = "xxxxx"

// minBareSecret is the shortest password replaced wherever it occurs in
// output. Shorter passwords (which would mangle ordinary text such as token
// numbers) are still masked inside anything shaped like a DSN.
const minBareSecret = 4

var (
	// pgURLPassword matches the password of a postgres URL in free text as
	// libpq and pgx read one: the user info runs to an '@' before the path,
	// so a password may hold ':', '?', '#' and '@' unescaped. The mask runs
	// to the last '@' before a '/', a blank, a double quote or a backquote
	// (which end the DSN in leasectl's and pgx's messages and JSON lines).
	pgURLPassword = regexp.MustCompile("((?:postgres(?:ql)?)://[^:/@\\s\"`]*:)[^/\\s\"`]*@")
	// urlPassword matches the password of an http(s) or etcd(s) URL in free text.
	// The password part stops at characters a URL's userinfo cannot hold
	// unescaped, so that it never runs on into the next URL of a JSON line.
	urlPassword = regexp.MustCompile(`((?:https?|etcds?)://[^:/?#@\s"']*:)[^@\s/?#"']*@`)
	// kvPassword matches password=VALUE in a query string or a key/value
	// DSN, in libpq's conninfo grammar: blanks may stand around '=', and the
	// value is single-quoted (a backslash escapes the next character, \'
	// and \\ among them; an unterminated quote runs to the end) or runs to
	// the next blank (also a backslash escapes), stopping at '&' or a quote
	// as in a URL's query or a JSON line. Group 1 is the key and '=', group
	// 2 the value as written.
	kvPassword = regexp.MustCompile(`((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s&'"\\]|\\.)+)`)
)

// redactor removes DSN passwords from text. The zero value redacts only
// DSN-shaped text. It is immutable and safe for concurrent use.
type redactor struct {
	secrets []string // longest first, each at least minBareSecret bytes
}

// newRedactor returns a redactor for the passwords found in dsns (empty
// strings are ignored).
func newRedactor(dsns ...string) *redactor {
	seen := map[string]bool{}
	r := &redactor{}
	for _, dsn := range dsns {
		for _, s := range secretsOf(dsn) {
			if len(s) >= minBareSecret && !seen[s] {
				seen[s] = true
				r.secrets = append(r.secrets, s)
			}
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

// with returns a redactor that also masks secrets (a bearer token, say)
// wherever they occur; empty and short strings are ignored as in newRedactor.
func (r *redactor) with(secrets ...string) *redactor {
	out := &redactor{secrets: append([]string(nil), r.secrets...)}
	for _, s := range secrets {
		if len(s) >= minBareSecret && !slices.Contains(out.secrets, s) {
			out.secrets = append(out.secrets, s)
		}
	}
	sort.Slice(out.secrets, func(i, j int) bool { return len(out.secrets[i]) > len(out.secrets[j]) })
	return out
}

// redact returns s with every known password and every DSN-shaped password
// replaced by a mask.
func (r *redactor) redact(s string) string {
	if r != nil {
		for _, sec := range r.secrets {
			s = strings.ReplaceAll(s, sec, mask)
		}
	}
	return maskKV(maskURLs(s))
}

// maskURLs masks the passwords of the URLs in s (postgres, http(s),
// etcd(s)).
func maskURLs(s string) string {
	s = pgURLPassword.ReplaceAllString(s, "${1}"+mask+"@")
	return urlPassword.ReplaceAllString(s, "${1}"+mask+"@")
}

// maskKV masks password=VALUE pairs, leaving pairs already masked as they
// are (so that text redacted twice keeps what follows the mask) and the
// key and '=' as written.
func maskKV(s string) string {
	return kvPassword.ReplaceAllStringFunc(s, func(m string) string {
		sub := kvPassword.FindStringSubmatch(m)
		if strings.HasPrefix(sub[2], mask) {
			return m
		}
		return sub[1] + mask
	})
}

// secretsOf returns the passwords written in dsn, in decoded and raw
// (percent-encoded, quoted or backslash-escaped) forms: the URL's userinfo
// password and its password and sslpassword query values, or for a
// key/value string its password values; and, when dsn writes a password and
// pgx parses it, the password pgx reads (libpq's grammar, which the
// textual search follows but cannot always match). It never fails: a DSN
// that does not parse is searched textually.
func secretsOf(dsn string) []string {
	var out []string
	add := func(s string) {
		if s != "" {
			out = append(out, s)
			if dec, err := url.QueryUnescape(s); err == nil && dec != s {
				out = append(out, dec)
			}
		}
	}
	writesPassword := false // a password of the user's, not sslpassword
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			writesPassword = true
		}
	}
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		// libpq's URI grammar: only a '/' ends the search for the user
		// info's '@', so the password may hold '?', '#' and '@'; taking
		// the last '@' masks all that any reading takes for the password.
		authority, _, _ := strings.Cut(rest, "/")
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			if _, pw, ok := strings.Cut(authority[:at], ":"); ok {
				add(pw)
				writesPassword = writesPassword || pw != ""
			}
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		raw := m[2]
		if q, ok := strings.CutPrefix(raw, "'"); ok {
			raw = strings.TrimSuffix(q, "'")
		}
		add(raw)
		add(unescapeConninfo(raw))
		writesPassword = writesPassword || !strings.HasPrefix(m[1], "ssl")
	}
	if writesPassword && isPostgresDSN(dsn) {
		// Only when the DSN writes one: pgx also takes a password from
		// PGPASSWORD and the password file, which are not the DSN's to mask.
		if c, err := pgconn.ParseConfig(dsn); err == nil {
			add(c.Password)
		}
	}
	return out
}

// unescapeConninfo removes the backslashes of a conninfo value as libpq
// and pgx read it: a backslash escapes the next character.
func unescapeConninfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			if i == len(s) {
				break // a trailing backslash escapes the end: dropped
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isPostgresDSN reports whether dsn is one of the PostgreSQL forms
// parseDSN reads: a postgres:// or postgresql:// URL or libpq's key=value
// pairs.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") || isKeyValueDSN(dsn)
}

// redactDSN returns dsn fit for messages: the password masked. A postgres
// URL is masked as libpq reads it (net/url would take a '?' in its
// password for the query's start).
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Opaque == "" && !isPostgresDSN(dsn) {
		return redactQuery(u.Redacted())
	}
	return (&redactor{}).redact(dsn)
}

// redactQuery masks password query values in an already parsed URL string.
func redactQuery(s string) string { return maskKV(s) }

// dsnArgs returns the values given to --dsn in args, found before cobra
// parses them, so that even a flag-parsing error cannot print a password.
func dsnArgs(args []string) []string {
	var out []string
	for i, arg := range args {
		if arg == "--" {
			break
		}
		if v, ok := strings.CutPrefix(arg, "--dsn="); ok {
			out = append(out, v)
		} else if arg == "--dsn" && i+1 < len(args) {
			out = append(out, args[i+1])
		}
	}
	return out
}

// redactingWriter removes passwords from everything written to w. leasectl
// writes whole lines or whole JSON objects in one Write, so a password is
// never split across calls.
//
// On stderr (logs and human messages) every known password is masked
// wherever it occurs. On stdout, which carries data (owners, keys, backend
// names, JSON for scripts), only passwords inside postgres URLs are masked,
// so that a password that happens to equal ordinary text never rewrites
// data; free-text messages bound for stdout are redacted where they are
// made (see printResult and finish).
type redactingWriter struct {
	w        io.Writer
	r        *redactor
	urlsOnly bool
}

// Write implements io.Writer. It reports len(p) on success, whatever the
// redaction changed.
func (rw *redactingWriter) Write(p []byte) (int, error) {
	var s string
	if rw.urlsOnly {
		s = maskURLs(string(p))
	} else {
		s = rw.r.redact(string(p))
	}
	if _, err := io.WriteString(rw.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}
