package contract_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/brokenstore"
)

// brokenEnv names the breakage that TestBrokenStoreSuite runs the suite on.
const brokenEnv = "LEASESTORE_CONTRACT_BROKEN"

// TestBrokenStoreSuite runs the contract suite on the broken store named by
// $LEASESTORE_CONTRACT_BROKEN. It is run by TestSuiteCatchesBrokenStores in a
// child process (the suite reports to its *testing.T), and skips otherwise.
func TestBrokenStoreSuite(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	kind, err := brokenstore.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	contract.Run(t, func(t *testing.T, clock *contract.Clock) contract.Harness {
		s := brokenstore.New(kind, &brokenstore.Config{Now: clock.Now})
		first := s.Handle()
		return contract.Harness{Backend: first, Second: s.Handle(), Audit: first}
	})
}

// failedCase matches the line the testing package prints for a failed
// subtest of the suite: its group and case.
var failedCase = regexp.MustCompile(`--- FAIL: TestBrokenStoreSuite/([^/\s]+)/(\S+)`)

// The contract suite fails on a store that bends one guarantee, in the
// group that checks it, and passes the same wrapper bending nothing.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("in the child process")
	}
	t.Parallel()
	for _, c := range []struct {
		kind   brokenstore.Kind
		groups []string // the groups run; one of them must fail
	}{
		{brokenstore.Correct, nil}, // every group, none fails
		{brokenstore.ReissueAfterRelease, []string{"Fencing"}},
		{brokenstore.ReissueAfterExpiry, []string{"Fencing"}},
		{brokenstore.ReissueAfterRevoke, []string{"Fencing"}},
		{brokenstore.DoubleGrant, []string{"Acquire", "Contention"}},
		{brokenstore.RenewAfterExpiry, []string{"Renew"}},
		{brokenstore.StaleRelease, []string{"Release", "Fencing"}},
		{brokenstore.ReplayCurrent, []string{"Idempotency"}},
		{brokenstore.ReusedIDRuns, []string{"Idempotency"}},
		{brokenstore.LockDelayIgnored, []string{"LockDelay"}},
		{brokenstore.LockDelayTooLong, []string{"LockDelay"}},
		{brokenstore.EarlyExpiry, []string{"Acquire", "Renew", "Get"}},
		{brokenstore.AuditMissing, []string{"Audit"}},
		{brokenstore.AuditForRefusal, []string{"Audit", "Release"}},
		{brokenstore.AuditWrongToken, []string{"Audit"}},
		{brokenstore.ListExpired, []string{"List"}},
		{brokenstore.SilentRevoke, []string{"HolderHearsLoss"}},
		{brokenstore.UncommittedRelease, []string{"Release"}},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			t.Parallel()
			run := "^TestBrokenStoreSuite$"
			if c.groups != nil {
				run += "/^(" + strings.Join(c.groups, "|") + ")$"
			}
			cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+string(c.kind))
			out, err := cmd.CombinedOutput()
			var failed []string
			for _, m := range failedCase.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1]+"/"+m[2])
			}
			t.Logf("failed: %v", failed)
			if c.kind == brokenstore.Correct {
				if err != nil {
					t.Fatalf("the suite fails on the wrapper bending nothing: %v\n%s", err, out)
				}
				return
			}
			if err == nil || len(failed) == 0 {
				t.Fatalf("the suite passes a store whose %s (err %v)\n%s", c.kind, err, out)
			}
			if !slices.ContainsFunc(failed, func(f string) bool { return slices.Contains(c.groups, strings.Split(f, "/")[0]) }) {
				t.Fatalf("no case of %v failed: %v", c.groups, failed)
			}
		})
	}
}
