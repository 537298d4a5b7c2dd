// Command leasectl is leasestore's operator CLI: inspect, acquire, renew,
// release and revoke leases, read the audit trail, migrate the schema, run
// the demo and the load generator. The commands live in package
// [github.com/leasestore/leasestore/cmd/leasectl/cli].
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/leasestore/leasestore/cmd/leasectl/cli"
)

func main() {
	// With SIGPIPE notified, a write to a closed stdout (leasectl demo | head)
	// fails with EPIPE instead of killing the process, so the command can
	// stop and clean up (cli.Execute exits 141 then).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// The handler stays until the process exits (stop is not called): a
	// second signal, as timeout(1) sends one to the process and then one
	// to its group, must not kill a command that is ending with its code.
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	os.Exit(cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
