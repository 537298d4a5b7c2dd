package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/protocol"
)

// namespacesJSON is namespaces' JSON output.
type namespacesJSON struct {
	Status     string   `json:"status"`
	Namespaces []string `json:"namespaces"`
}

func (a *app) namespacesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "namespaces",
		Short: "List the namespaces that hold live leases",
		Long: `List, in byte order, every namespace that holds at least one live lease
(expired, released and revoked leases do not count).`,
		Example: `  leasectl namespaces
  leasectl namespaces -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd, readAccess, func() error { return nil }, func(ctx context.Context, s *store) error {
				var all []string
				for after := ""; ; {
					page, ok, err := namespaces(ctx, s, after)
					if err != nil {
						return failWith(err)
					}
					if !ok {
						return fail(protocol.StatusUnavailable, "namespaces: the %s store cannot list namespaces", s.backend)
					}
					all = append(all, page...)
					if len(page) < protocol.MaxListLimit {
						break
					}
					after = page[len(page)-1]
				}
				if a.output == "json" {
					a.printJSON(namespacesJSON{Status: string(protocol.StatusFound), Namespaces: append([]string{}, all...)})
					return nil
				}
				if len(all) == 0 {
					a.printText("no namespace holds a live lease\n")
					return nil
				}
				a.printText(strings.Join(all, "\n") + "\n")
				return nil
			})
		},
	}
}

// completeNamespaces completes a --namespace value with the namespaces
// (the first thousand) that hold live leases in the store the command line
// names; like completeKeys it never creates a store and stays silent on
// errors.
func (a *app) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	const none = cobra.ShellCompDirectiveNoFileComp
	ctx, s, done := a.storeForCompletion(cmd)
	if s == nil {
		return nil, none
	}
	defer done()
	page, ok, err := namespaces(ctx, s, "")
	if err != nil || !ok {
		return nil, none
	}
	var out []string
	for _, ns := range page {
		if strings.HasPrefix(ns, toComplete) {
			out = append(out, ns)
		}
	}
	return out, none
}

// namespaces reads a page of the namespaces after after that hold live
// leases, through the store's runtime; ok is false when the backend cannot
// list namespaces.
func namespaces(ctx context.Context, s *store, after string) (page []string, ok bool, err error) {
	ok, err = through(ctx, s, protocol.OpNamespaces, func(ctx context.Context, nl protocol.NamespaceLister) (err error) {
		page, err = nl.Namespaces(ctx, after, protocol.MaxListLimit)
		return err
	})
	return page, ok, err
}

// allNamespacesFlag gives cmd -A/--all-namespaces, which reads every
// namespace (as -n ""): it sets *ns to "" before the command runs, and
// refuses -n beside it, and a key (--key, or the KEY argument of watch):
// a key is in one namespace, which -n names.
func allNamespacesFlag(cmd *cobra.Command, ns *string) {
	var all bool
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, `every namespace (as -n "")`)
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if !all {
			return nil
		}
		if cmd.Flags().Changed("namespace") {
			return usageError("-A/--all-namespaces and -n/--namespace go apart: give one")
		}
		if cmd.Flags().Changed("key") || len(args) > 0 {
			return usageError("-A/--all-namespaces reads every namespace and a key is in one: give -n NS (or the key as NS/NAME) instead of -A")
		}
		*ns = ""
		return nil
	}
}
