package protocol

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests (the external examples included) if a
// goroutine outlives them: the runtime's Close and the blocking test backend
// must not leave any behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
