package protocol

// SetReleaseHook makes h.Release call f once it found the lease not yet
// released, before it stops the renewals: a test's way to make a loss
// happen at that point. Call it before Release, from the same goroutine.
func SetReleaseHook(h *Held, f func()) { h.releaseHook = f }
