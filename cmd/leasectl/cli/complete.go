package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

// completionTimeout bounds what completing a key may cost the shell.
const completionTimeout = 2 * time.Second

// storeForCompletion opens, for a completion, the store the command line
// names, with logs discarded and a short deadline; it returns a nil store
// when there is none to read (a SQLite file that does not exist is never
// created) or it cannot be opened. done closes it.
func (a *app) storeForCompletion(cmd *cobra.Command) (ctx context.Context, s *store, done func()) {
	t, err := parseDSN(a.dsn())
	if err != nil {
		return nil, nil, nil
	}
	if t.dialect == migrations.SQLite {
		if _, err := os.Stat(t.path); err != nil {
			return nil, nil, nil
		}
	}
	a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	s, err = a.openTarget(ctx, t, openOptions{access: readAccess})
	if err != nil {
		cancel()
		return nil, nil, nil
	}
	return ctx, s, func() { s.close(a); cancel() }
}

// completeKeys completes a command's KEY argument from the live leases in
// the store the command line names (see storeForCompletion), in a form that
// reads back as the same key (keyArg; DESIGN.md contract v3):
//
//   - with -n NS, the names in NS that start with toComplete, as written;
//   - without -n, toComplete with a "/" is NS/NAME: the names in NS, the
//     namespace part kept as typed (escapes and all);
//   - without -n and without a "/", the names in the default namespace,
//     bare when they hold no "/" and as default/NAME when they do (bare,
//     a/b would read as the name b in namespace a), and NS/ (escaped, as
//     protocol.EscapeNamespace writes it) for each namespace that holds a
//     live lease, to go on from; then no space is added after a candidate.
//
// Candidates are sorted and start with toComplete.
func (a *app) completeKeys(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	const none = cobra.ShellCompDirectiveNoFileComp
	if len(args) > 0 {
		return nil, none
	}
	ns, err := cmd.Flags().GetString("namespace")
	if err != nil {
		return nil, none
	}
	ctx, s, done := a.storeForCompletion(cmd)
	if s == nil {
		return nil, none
	}
	defer done()
	k, err := splitKeyArg(cmd, ns, toComplete)
	if err != nil {
		return nil, none
	}
	withNS := cmd.Flags().Changed("namespace")
	before, _, slash := strings.Cut(toComplete, "/")
	res, err := s.rt.List(ctx, protocol.ListRequest{Namespace: k.Namespace, Prefix: k.Name, Limit: protocol.MaxListLimit})
	if err != nil || res.Status != protocol.StatusFound {
		return nil, none
	}
	var cands []string
	for _, l := range res.Leases {
		name := l.Key.Name
		switch {
		case withNS:
		case slash:
			name = before + "/" + name
		case strings.Contains(name, "/"):
			name = l.Key.String()
		}
		if strings.HasPrefix(name, toComplete) {
			cands = append(cands, name)
		}
	}
	directive := none
	if !withNS && !slash {
		if page, ok, err := namespaces(ctx, s, ""); err == nil && ok {
			for _, n := range page {
				if c := protocol.EscapeNamespace(n) + "/"; strings.HasPrefix(c, toComplete) {
					cands = append(cands, c)
					directive |= cobra.ShellCompDirectiveNoSpace
				}
			}
		}
	}
	slices.Sort(cands)
	return cands, directive
}
