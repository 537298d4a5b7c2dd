package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/leasestore/leasestore/internal/nsglob"
	"github.com/leasestore/leasestore/protocol"
)

// lockDelaysFlag is serve's repeatable --lock-delay NS=DURATION: the
// namespace defaults of the lock-delay of the served store's runtime
// ([protocol.Config].LockDelays), in the order given (the first glob that
// matches an acquire's namespace applies). Set refuses a malformed entry,
// and one that can never apply (the check of [protocol.ValidateLockDelays],
// worded for the flag), when the command line is parsed (exit 2, before
// the store opens).
type lockDelaysFlag struct {
	delays *[]protocol.NamespaceLockDelay
}

func (f lockDelaysFlag) String() string {
	if f.delays == nil {
		return ""
	}
	parts := make([]string, 0, len(*f.delays))
	for _, d := range *f.delays {
		parts = append(parts, d.Namespaces+"="+shortDuration(d.Delay))
	}
	return strings.Join(parts, ",")
}

func (f lockDelaysFlag) Set(s string) error {
	// A duration holds no "=": the last one ends the glob.
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return fmt.Errorf("%q is not NS=DURATION: write a namespace glob and a lock-delay, such as jobs-*=15s", s)
	}
	glob, value := s[:i], s[i+1:]
	if glob == "" {
		return fmt.Errorf("%q names no namespace: write a glob before the =, such as jobs-*=15s or *=15s", s)
	}
	var delay time.Duration
	if err := newLockDelayFlag(&delay).Set(value); err != nil {
		return fmt.Errorf("%s: %w", glob, err)
	}
	d := protocol.NamespaceLockDelay{Namespaces: glob, Delay: delay}
	if err := d.Validate(); err != nil {
		return err
	}
	for _, prev := range *f.delays {
		if prev.Namespaces == glob {
			return fmt.Errorf("the namespace glob %q is given twice (%s and %s): the first applies, give it once", glob,
				shortDuration(prev.Delay), shortDuration(delay))
		}
		if nsglob.Shadows(prev.Namespaces, glob) {
			return fmt.Errorf("%s can never apply: the earlier %s=%s matches every namespace it does, and the first matching glob applies: give %s first, or drop it",
				s, prev.Namespaces, shortDuration(prev.Delay), s)
		}
	}
	*f.delays = append(*f.delays, d)
	return nil
}

func (f lockDelaysFlag) Type() string { return "NS=DURATION" }
