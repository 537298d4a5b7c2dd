// Package testkit is the home of the module's test scaffolding: harnesses and
// helpers that tests and benchmarks import (pgtest, httpcontract, scalebench,
// wakebench, syncbuf, etcdcluster, testca, getspy, prunerace, followprune, appdb) and the benchtable tool behind
// `make bench`. Nothing the product ships may import a package under
// testkit; internal/boundary checks that, so `go list -deps` of a product package shows the product alone.
package testkit
