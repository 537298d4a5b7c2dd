package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionJSON is the output of version.
type versionJSON struct {
	Status   string `json:"status"`
	Module   string `json:"module"`
	Version  string `json:"version"`  // module version; "(devel)" for a build from a checkout
	Revision string `json:"revision"` // VCS revision, "" when the build did not record it
	Time     string `json:"time"`     // VCS commit time, "" when not recorded
	Modified bool   `json:"modified"` // the working tree had local changes
	Go       string `json:"go"`
}

// buildVersion reads the version from the binary's build information.
func buildVersion() versionJSON {
	v := versionJSON{Status: StatusOK, Module: "github.com/leasestore/leasestore", Version: "(unknown)", Go: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if info.Main.Path != "" {
		v.Module = info.Main.Path
	}
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print leasectl's version",
		Long: `Print the module version and, when the build recorded it, the VCS revision
(go build records it unless -buildvcs=false).`,
		Example: `  leasectl version -o json`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(_ *cobra.Command, _ []string) error {
			v := buildVersion()
			if a.output == "json" {
				a.printJSON(v)
				return nil
			}
			var b strings.Builder
			fmt.Fprintf(&b, "leasectl %s (%s)", v.Version, v.Module)
			if v.Revision != "" {
				fmt.Fprintf(&b, " revision %s", v.Revision)
				if v.Modified {
					b.WriteString(" (modified)")
				}
			}
			fmt.Fprintf(&b, " %s\n", v.Go)
			a.printText(b.String())
			return nil
		},
	}
}
