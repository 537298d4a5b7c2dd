package sqlite_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestConfigHasNoClock: production code must not be able to swap the clock
// that judges expiry; only this package's tests can (export_test.go).
func TestConfigHasNoClock(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeOf(sqlite.Config{})
	clock := reflect.TypeOf(time.Now)
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() && f.Type == clock {
			t.Fatalf("sqlite.Config.%s is a clock that production code can set", f.Name)
		}
	}
}
