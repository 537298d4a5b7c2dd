//go:build linux

package sqlite_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestErrorsLinuxTypeChecksOnEveryLinuxArch type-checks errors_linux.go
// (go vet of the file alone: it imports only the standard library) for
// each Linux architecture modernc.org/sqlite, the pure-Go driver,
// supports. syscall.Statfs_t's Bsize is int64 on amd64 and arm64 only
// (int32 on 386 and arm, uint32 on s390x), so fileSystemRoom's
// int64(blocks) * st.Bsize does not compile there, and the embedded
// default backend, which needs no cgo precisely to build anywhere Go
// does, cannot be built for them.
func TestErrorsLinuxTypeChecksOnEveryLinuxArch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet for seven architectures")
	}
	for _, arch := range []string{"386", "arm", "arm64", "loong64", "ppc64le", "riscv64", "s390x"} {
		cmd := exec.Command("go", "vet", "errors_linux.go")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=linux GOARCH=%s go vet errors_linux.go: %v\n%s", arch, err, strings.TrimSpace(string(out)))
		}
	}
}
