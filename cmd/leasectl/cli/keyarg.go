package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/protocol"
)

// keyArg reads a command's KEY argument. leasectl prints a key as NS/NAME
// (protocol.Key.String: '%' and '/' in NS escaped as %25 and %2F) and
// accepts that form back: without -n, KEY's text up to its first "/" is
// the namespace, unescaped, and the rest the name as written, as
// protocol.KeyFromString reads it; a KEY without "/" is a name in the
// default namespace. With -n NS, NS is the namespace as written (no
// escapes, as in JSON) and KEY the name in it, as written (it may hold
// slashes). A malformed escape in KEY's namespace, or an empty namespace
// or name part ("/x", "x/"), is invalid input, refused with the KEY to
// write for that text as a name in the default namespace.
func keyArg(cmd *cobra.Command, ns, arg string) (protocol.Key, error) {
	k, err := splitKeyArg(cmd, ns, arg)
	if err != nil || cmd.Flags().Changed("namespace") {
		return k, err
	}
	var part string
	switch {
	case k.Namespace == "" && strings.HasPrefix(arg, "/"):
		part = "no namespace before its first /"
	case k.Name == "" && strings.Contains(arg, "/"):
		part = "no name after its first /"
	default:
		return k, nil
	}
	meant := protocol.Key{Namespace: protocol.DefaultNamespace, Name: arg}.String()
	return protocol.Key{}, &failure{status: string(protocol.StatusInvalid), err: fmt.Errorf(
		"key %q: %s: write %s for the name %s in namespace %s, or give the namespace with -n and the name as KEY",
		arg, part, meant, arg, protocol.DefaultNamespace)}
}

// splitKeyArg reads KEY as keyArg does, but takes an empty namespace or
// name part as it comes: completion reads "NS/" as every name in NS.
func splitKeyArg(cmd *cobra.Command, ns, arg string) (protocol.Key, error) {
	if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed {
		return protocol.Key{Namespace: ns, Name: arg}, nil
	}
	if before, after, ok := strings.Cut(arg, "/"); ok {
		ns, err := protocol.UnescapeNamespace(before)
		if err != nil {
			return protocol.Key{}, &failure{status: string(protocol.StatusInvalid), err: err}
		}
		return protocol.Key{Namespace: ns, Name: after}, nil
	}
	return protocol.Key{Namespace: ns, Name: arg}, nil
}
