package cli

import (
	"io"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// mask replaces a password wherever leasectl prints one.
const mask = "xxxxx"

// minBareSecret is the shortest password replaced wherever it occurs in
// output. Shorter passwords (which would mangle ordinary text such as token
// numbers) are still masked inside anything shaped like a DSN.
const minBareSecret = 4

var (
	// urlPassword matches the password of a postgres, http(s) or etcd(s) URL in free text.
	// The password part stops at characters a URL's userinfo cannot hold
	// unescaped, so that it never runs on into the next URL of a JSON line.
	urlPassword = regexp.MustCompile(`((?:postgres(?:ql)?|https?|etcds?)://[^:/?#@\s"']*:)[^@\s/?#"']*@`)
	// kvPassword matches password=VALUE in a query string or a key/value DSN.
	kvPassword = regexp.MustCompile(`((?:ssl)?password=)(?:'[^']*'|[^\s&'"]+)`)
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
	s = urlPassword.ReplaceAllString(s, "${1}"+mask+"@")
	return maskKV(s)
}

// maskKV masks password=VALUE pairs, leaving pairs already masked as they
// are (so that text redacted twice keeps what follows the mask).
func maskKV(s string) string {
	return kvPassword.ReplaceAllStringFunc(s, func(m string) string {
		key, value, _ := strings.Cut(m, "=")
		if strings.HasPrefix(value, mask) {
			return m
		}
		return key + "=" + mask
	})
}

// secretsOf returns the passwords written in dsn, in decoded and raw
// (percent-encoded) forms: the URL's userinfo password and its password and
// sslpassword query values, or for a key/value string its password values.
// It never fails: a DSN that does not parse is searched textually.
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
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		authority := rest
		if i := strings.IndexByte(authority, '?'); i >= 0 {
			authority = authority[:i]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			if _, pw, ok := strings.Cut(authority[:at], ":"); ok {
				add(pw)
			}
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		add(strings.Trim(strings.TrimPrefix(m[0], m[1]), "'"))
	}
	return out
}

// redactDSN returns dsn fit for messages: the password masked.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Opaque == "" {
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
		s = urlPassword.ReplaceAllString(string(p), "${1}"+mask+"@")
	} else {
		s = rw.r.redact(string(p))
	}
	if _, err := io.WriteString(rw.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}
