package protocol

import "context"

// NamespaceLister is implemented by backends that can list the namespaces
// that hold live leases (memstore and both SQL backends); `leasectl
// namespaces` and its completion of -n use it.
type NamespaceLister interface {
	// Namespaces returns up to limit (1 to [MaxListLimit]) namespaces that
	// hold a live lease, in byte order, each greater than after ("" to
	// start at the first). Fewer than limit means there are no more.
	Namespaces(ctx context.Context, after string, limit int) ([]string, error)
}

// OpNamespaces names a namespace listing in errors.
const OpNamespaces Op = "namespaces"
