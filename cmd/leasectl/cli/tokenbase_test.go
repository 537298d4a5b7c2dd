package cli

import (
	"fmt"
	"testing"
)

// TestTokenFlagIsDecimal: --token is the fencing token as leasectl prints
// it, in decimal. A zero-padded token (010) is read as the decimal number
// or refused (exit 2); it never names another token. pflag's Int64 reads
// 010 as octal, 8: release k8 --token 010 released the lease of token 8,
// which the caller did not name, and revoke k9 --token 011 revoked token 9.
func TestTokenFlagIsDecimal(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	for i := 1; i <= 10; i++ { // key ki holds token i
		o := runCLI(t, e, "acquire", fmt.Sprintf("k%d", i), "--owner", "w", "-o", "json")
		wantCode(t, o, ExitOK)
		if tok := token(t, o.json(t)); tok != int64(i) {
			t.Fatalf("acquire k%d: token %d, want %d", i, tok, i)
		}
	}
	for _, args := range [][]string{
		{"renew", "k8", "--owner", "w", "--token", "010", "--ttl", "1h"},
		{"release", "k8", "--owner", "w", "--token", "010"},
		{"revoke", "k9", "--reason", "r", "--token", "011"},
	} {
		if o := runCLI(t, e, append(args, "-o", "json")...); o.code == ExitOK {
			t.Errorf("leasectl %v took effect on a lease whose token it did not name (--token read as octal): %s", args, o.stdout)
		}
	}
	for _, k := range []string{"k8", "k9"} {
		if o := runCLI(t, e, "get", k); o.code != ExitOK {
			t.Errorf("get %s after commands naming another token: exit %d, want 0 (still held)\n%s", k, o.code, o.stdout)
		}
	}
}
