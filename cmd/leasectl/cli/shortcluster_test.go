package cli

import (
	"strings"
	"testing"
)

// TestUsageErrorInJSONWithClusteredShortFlags: -o json given inside a
// cluster of short flags (-Ao json, -fo json, -Aojson), as cobra reads
// it, makes a refused command line print one JSON object on stdout, as -o
// json alone does. The format was looked for before parsing in arguments
// that begin with -o only: a flag error met before the cluster (list
// --bogus -Ao json) went to stderr as text, stdout empty, as did one
// met in the cluster itself (list -zo json).
func TestUsageErrorInJSONWithClusteredShortFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"list", "--bogus", "-Ao", "json"},
		{"list", "--bogus", "-Aojson"},
		{"audit", "--bogus", "-fo", "json"},
		{"watch", "--bogus", "-Ao", "json"},
		// An unknown short flag in the cluster before -o: pflag refuses
		// it, and the format was looked for no further in the cluster.
		{"list", "-zo", "json"},
		{"list", "-zojson"},
		{"list", "-Azo", "json"},
	} {
		o := runCLI(t, sqliteEnv(t), args...)
		wantCode(t, o, ExitUsage)
		if !strings.HasPrefix(o.stdout, "{") {
			t.Errorf("leasectl %s: stdout %q, stderr %q; want one JSON object on stdout",
				strings.Join(args, " "), o.stdout, strings.TrimSpace(o.stderr))
			continue
		}
		o.json(t)
	}
}
