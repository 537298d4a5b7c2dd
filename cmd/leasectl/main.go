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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
