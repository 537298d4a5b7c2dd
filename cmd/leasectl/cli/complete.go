package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

// completionTimeout bounds what completing a key may cost the shell.
const completionTimeout = 2 * time.Second

// completeKeys completes a command's KEY argument with the names of live
// leases in the command's --namespace that start with toComplete, read
// from the store the command line names. It never creates a store (a
// SQLite file that does not exist completes nothing) and stays silent on
// errors: a shell prompt is no place for them.
func (a *app) completeKeys(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	const none = cobra.ShellCompDirectiveNoFileComp
	if len(args) > 0 {
		return nil, none
	}
	ns, err := cmd.Flags().GetString("namespace")
	if err != nil {
		return nil, none
	}
	t, err := parseDSN(a.dsn())
	if err != nil {
		return nil, none
	}
	if t.dialect == migrations.SQLite {
		if _, err := os.Stat(t.path); err != nil {
			return nil, none
		}
	}
	a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	s, err := a.openTarget(ctx, t, openOptions{access: readAccess})
	if err != nil {
		return nil, none
	}
	defer s.close(a)
	res, err := s.rt.List(ctx, protocol.ListRequest{Namespace: ns, Prefix: toComplete, Limit: protocol.MaxListLimit})
	if err != nil || res.Status != protocol.StatusFound {
		return nil, none
	}
	names := make([]string, 0, len(res.Leases))
	for _, l := range res.Leases {
		names = append(names, l.Key.Name)
	}
	return names, none
}
