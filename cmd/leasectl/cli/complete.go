package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
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

// completeKeys completes a command's KEY argument with the names of live
// leases in the command's --namespace that start with toComplete, read
// from the store the command line names (see storeForCompletion).
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
	// Without -n, KEY is read as NS/NAME (keyArg): complete in that form,
	// keeping the namespace part as typed (escapes and all).
	k, err := keyArg(cmd, ns, toComplete)
	if err != nil {
		return nil, none
	}
	prefix := ""
	if before, _, ok := strings.Cut(toComplete, "/"); ok && !cmd.Flags().Changed("namespace") {
		prefix = before + "/"
	}
	res, err := s.rt.List(ctx, protocol.ListRequest{Namespace: k.Namespace, Prefix: k.Name, Limit: protocol.MaxListLimit})
	if err != nil || res.Status != protocol.StatusFound {
		return nil, none
	}
	names := make([]string, 0, len(res.Leases))
	for _, l := range res.Leases {
		names = append(names, prefix+l.Key.Name)
	}
	return names, none
}
