package postgres

import (
	"context"
	"strings"
	"testing"
)

// A keyword/value DSN may write blanks around "=" and quote a password with
// backslash escapes (libpq's grammar, which pgx follows): the password is
// still kept out of Open's error when pgx cannot parse the DSN.
func TestOpenErrorNamesNoKeywordValuePassword(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dsn, secret string }{
		{"host=127.0.0.1 port=99999 user=root password = S3cretPW dbname=test", "S3cretPW"},
		{"host=127.0.0.1 sslmode=bogus password =S3cretPW", "S3cretPW"},
		{"host=127.0.0.1 sslmode=bogus password= 'S3cret PW'", "S3cret PW"},
		{`host=127.0.0.1 sslmode=bogus password='S3c\'retPW'`, `retPW`},
		{`host=127.0.0.1 sslmode=bogus password=S3c\ retPW`, `retPW`},
	} {
		_, err := Open(context.Background(), c.dsn, nil)
		if err == nil || strings.Contains(err.Error(), c.secret) {
			t.Errorf("Open(%q): %v; want an error without the password", c.dsn, err)
		}
	}
	for dsn, want := range map[string]string{
		"host=h password = secret user=u":   "secret",
		"host=h password=  'sec ret' ":      "sec ret",
		`host=h password='se\'cret' user=u`: `se\'cret`,
		`password=se\ cret`:                 `se\ cret`,
		"host=h passwordx=no user=u":        "",
	} {
		if got := dsnPassword(dsn); got != want {
			t.Errorf("dsnPassword(%q) = %q, want %q", dsn, got, want)
		}
	}
}
