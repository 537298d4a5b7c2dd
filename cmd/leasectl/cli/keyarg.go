package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/protocol"
)

// keyArg reads a command's KEY argument. leasectl prints a key as NS/NAME
// (protocol.Key.String) and accepts that form back: without -n, KEY's text
// up to its first "/" is the namespace and the rest the name, as
// protocol.KeyFromString reads it, and a KEY without "/" is a name in the
// default namespace. With -n NS, KEY is the name in NS, as written (it may
// hold slashes).
func keyArg(cmd *cobra.Command, ns, arg string) protocol.Key {
	if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed {
		return protocol.Key{Namespace: ns, Name: arg}
	}
	if before, after, ok := strings.Cut(arg, "/"); ok {
		return protocol.Key{Namespace: before, Name: after}
	}
	return protocol.Key{Namespace: ns, Name: arg}
}
