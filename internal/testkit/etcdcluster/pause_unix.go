//go:build unix

package etcdcluster

import "syscall"

// Pause stops member i's process (SIGSTOP) without ending it: its
// connections stay open and nothing on them is answered, as with a member
// frozen (a paused VM) or behind a network that drops its packets. Call
// [Cluster.Resume] before [Cluster.Stop], which otherwise waits 5s for
// it.
func (c *Cluster) Pause(i int) { c.signal(i, syscall.SIGSTOP) }

// Resume continues member i's process after [Cluster.Pause] (SIGCONT).
func (c *Cluster) Resume(i int) { c.signal(i, syscall.SIGCONT) }

func (c *Cluster) signal(i int, sig syscall.Signal) {
	m := c.Members[i]
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}
