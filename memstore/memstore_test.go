package memstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestContract(t *testing.T) {
	contract.Run(t, func(t *testing.T, clock *contract.Clock) contract.Harness {
		store := memstore.NewStore(&memstore.Config{Now: clock.Now})
		first := store.Handle()
		return contract.Harness{Backend: first, Second: store.Handle(), Audit: first}
	})
}
