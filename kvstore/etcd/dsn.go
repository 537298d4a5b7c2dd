package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/leasestore/leasestore/durations"
)

// DSN schemes: etcd:// connects in plain text unless a TLS parameter is
// given; etcds:// always uses TLS.
const (
	SchemeEtcd  = "etcd://"
	SchemeEtcds = "etcds://"
)

// IsDSN reports whether dsn names an etcd store (etcd:// or etcds://).
func IsDSN(dsn string) bool {
	return strings.HasPrefix(dsn, SchemeEtcd) || strings.HasPrefix(dsn, SchemeEtcds)
}

// parseParams reads a DSN's NAME=VALUE&... parameters as the user, the
// password and the prefix are read: percent-decoded by url.PathUnescape,
// so a '+' stays a '+' (a file name such as ca+intermediate.pem, as
// etcdctl takes it), not the blank of an HTML form (url.ParseQuery).
func parseParams(raw string) (url.Values, error) {
	q := url.Values{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return nil, errors.New("etcd dsn: parameters: a ';' separates none: join them with '&' (write a ';' in a value as %3B)")
		}
		rawName, rawVal, _ := strings.Cut(pair, "=")
		name, err := url.PathUnescape(rawName)
		if err != nil {
			return nil, fmt.Errorf("etcd dsn: parameter %q is badly percent-encoded", rawName)
		}
		val, err := url.PathUnescape(rawVal)
		if err != nil {
			return nil, fmt.Errorf("etcd dsn: %s: the value is badly percent-encoded", name)
		}
		q[name] = append(q[name], val)
	}
	return q, nil
}

// ParseDSN reads a DSN of the form
//
//	etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/PREFIX[?PARAMS]
//	etcds://...   (TLS)
//
// USER and PASSWORD are etcd's authentication (etcdctl --user USER:PASSWORD),
// percent-encoded where they hold reserved characters; PREFIX is the
// store's key prefix ("/PREFIX/"). PARAMS, as etcdctl's flags of the same
// names: cacert=FILE (CA bundle to verify the servers; implies TLS),
// cert=FILE and key=FILE (client certificate; imply TLS),
// insecure-skip-tls-verify=true (implies TLS; =false, etcdctl's default,
// changes nothing), dial-timeout=DURATION (the one duration
// grammar of leasectl and the HTTP API: 5s, 1h30m, 1d); an '@' in a
// parameter is written %40, an '&' %26, and a '+' stands for itself, as in
// the user, password and prefix (percent-decoding, not a form's). Bad input is an error that never repeats the
// password, not even when a '/' or '?' in it was not percent-encoded (an
// '@' after the hosts or after the '?' is refused with a fixed message).
func ParseDSN(dsn string) (*Config, error) {
	var rest string
	var secure bool
	switch {
	case strings.HasPrefix(dsn, SchemeEtcds):
		rest, secure = dsn[len(SchemeEtcds):], true
	case strings.HasPrefix(dsn, SchemeEtcd):
		rest = dsn[len(SchemeEtcd):]
	default:
		return nil, errors.New("etcd dsn: want etcd://HOST:PORT[,HOST:PORT...]/PREFIX, or etcds:// for TLS")
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	if strings.Contains(rawQuery, "@") {
		// A '?' (after a '/', or alone) in the user or password cut the
		// DSN there: what follows would be read as parameters, and an
		// error naming one would repeat the end of the password. A
		// parameter's own '@' is written %40.
		return nil, errors.New("etcd dsn: an '@' after the '?': percent-encode a '/' and a '?' in the user or password as %2F and %3F (and an '@' in a parameter as %40)")
	}
	authority, path, ok := strings.Cut(rest, "/")
	if !ok || strings.Trim(path, "/") == "" {
		return nil, errors.New("etcd dsn: a key prefix is required after the hosts, as in etcd://127.0.0.1:2379/leasestore")
	}
	if strings.Contains(path, "@") {
		// A '/' in the user or password cut the DSN there: the rest of the
		// password would be taken for a prefix, its start for a host.
		return nil, errors.New("etcd dsn: an '@' after the hosts: percent-encode a '/' in the user or password as %2F (and an '@' in the prefix as %40)")
	}
	cfg := &Config{}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo := authority[:at]
		authority = authority[at+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		var err error
		if cfg.Username, err = url.PathUnescape(user); err != nil || cfg.Username == "" {
			return nil, errors.New("etcd dsn: the user name before '@' is empty or badly percent-encoded")
		}
		if hasPass {
			if cfg.Password, err = url.PathUnescape(pass); err != nil {
				return nil, errors.New("etcd dsn: the password is badly percent-encoded")
			}
			if strings.ContainsRune(cfg.Password, 0) {
				return nil, errors.New("etcd dsn: the password holds a NUL character (%00), which no etcd server takes")
			}
		}
	}
	prefix, err := url.PathUnescape(path)
	if err != nil {
		return nil, fmt.Errorf("etcd dsn: prefix %q is badly percent-encoded", path)
	}
	cfg.Prefix = canonicalPrefix(prefix)
	q, err := parseParams(rawQuery)
	if err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	ensureTLS := func() *tls.Config {
		if tlsCfg == nil {
			tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		return tlsCfg
	}
	if secure {
		ensureTLS()
	}
	for name, vals := range q {
		v := vals[len(vals)-1]
		switch name {
		case "cacert":
			pem, err := os.ReadFile(v)
			if err != nil {
				return nil, fmt.Errorf("etcd dsn: cacert: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("etcd dsn: cacert: %s holds no PEM certificate", v)
			}
			ensureTLS().RootCAs = pool
		case "cert", "key":
		case "insecure-skip-tls-verify":
			skip, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("etcd dsn: insecure-skip-tls-verify: want true or false, got %q", v)
			}
			if skip { // false is etcdctl's default: it implies no TLS
				ensureTLS().InsecureSkipVerify = true
			}
		case "dial-timeout":
			d, err := durations.Parse(v)
			if err != nil {
				return nil, fmt.Errorf("etcd dsn: dial-timeout: %w", err)
			}
			if d <= 0 {
				return nil, fmt.Errorf("etcd dsn: dial-timeout: %v is not positive: write a duration such as 5s", d)
			}
			cfg.DialTimeout = d
		default:
			return nil, fmt.Errorf("etcd dsn: unknown parameter %q (known: cacert, cert, key, insecure-skip-tls-verify, dial-timeout)", name)
		}
	}
	if cert, key := q.Get("cert"), q.Get("key"); cert != "" || key != "" {
		if cert == "" || key == "" {
			return nil, errors.New("etcd dsn: cert and key go together")
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("etcd dsn: cert and key: %w", err)
		}
		ensureTLS().Certificates = []tls.Certificate{pair}
	}
	cfg.TLS = tlsCfg
	scheme := "http://"
	if tlsCfg != nil {
		scheme = "https://"
	}
	for _, h := range strings.Split(authority, ",") {
		if err := checkHostPort(h); err != nil {
			return nil, err
		}
		cfg.Endpoints = append(cfg.Endpoints, scheme+h)
	}
	return cfg, nil
}

// checkHostPort refuses a member's address that cannot be dialled as
// written, naming it: not HOST:PORT, an empty host, a host with blanks or
// control characters, a port that is not a number from 1 to 65535 (digits
// only), or an address the etcd client cannot read as a URL's host (an
// IPv6 zone's '%' not written as %25), which it would dial as written.
func checkHostPort(h string) error {
	host, port, err := net.SplitHostPort(h)
	if err != nil || port == "" {
		return fmt.Errorf("etcd dsn: %q is not HOST:PORT", h)
	}
	if host == "" || strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("etcd dsn: %q: the host is empty or holds blanks or control characters", h)
	}
	digits := !strings.ContainsFunc(port, func(r rune) bool { return r < '0' || r > '9' })
	if n, err := strconv.Atoi(port); !digits || err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("etcd dsn: %q: the port must be a number from 1 to 65535", h)
	}
	if u, err := url.Parse("http://" + h); err != nil || u.Host != h {
		return fmt.Errorf("etcd dsn: %q is not a URL's host: write an IPv6 zone's %% as %%25, as in [fe80::1%%25eth0]:2379", h)
	}
	return nil
}

// Redact returns dsn with its password masked, fit for messages.
func Redact(dsn string) string {
	i := strings.Index(dsn, "://")
	if i < 0 {
		return dsn
	}
	rest := dsn[i+3:]
	authority := rest
	if j := strings.IndexAny(authority, "/?"); j >= 0 {
		authority = authority[:j]
	}
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		// A '/' or '?' in the password that is not percent-encoded (a DSN
		// ParseDSN refuses): the password reaches to the last '@'. An '@'
		// elsewhere (a file name in a parameter) masks more than the
		// password, never less.
		if at = strings.LastIndexByte(rest, '@'); at < 0 {
			return dsn
		}
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return dsn
	}
	return dsn[:i+3] + user + ":xxxxx" + rest[at:]
}
