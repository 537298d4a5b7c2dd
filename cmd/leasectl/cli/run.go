package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasestore/leasestore/protocol"
)

// exitCode is returned by run: the exit code of its command, or ExitLost.
// Execute exits with it as it is.
type exitCode int

func (e exitCode) Error() string { return "exit status " + strconv.Itoa(int(e)) }

// Exit codes of run when its command could not be started, as shells
// report them.
const (
	exitCannotExecute = 126 // found but not executable
	exitNotFound      = 127 // not found
)

// The environment run gives its command.
const (
	EnvToken     = "LEASESTORE_TOKEN"
	EnvKey       = "LEASESTORE_KEY"
	EnvNamespace = "LEASESTORE_NAMESPACE"
)

// groupPoll is how often run looks whether processes CMD left behind
// have ended.
const groupPoll = 20 * time.Millisecond

// pipeDelay is how long run, once CMD has ended, still copies output
// through pipes that processes CMD left running hold open (only for
// streams that are not files, as an embedding program may pass to
// Execute) before it closes them and stops those processes.
const pipeDelay = time.Second

// DefaultRunGrace is how long run's command has, after SIGTERM when the
// lease was lost, before SIGKILL.
const DefaultRunGrace = 10 * time.Second

func (a *app) runCommand() *cobra.Command {
	var (
		ns, owner             string
		ttl, grace, lockDelay time.Duration
		w                     waitFlags
	)
	cmd := &cobra.Command{
		Use:   "run KEY [flags] -- CMD [ARGS...]",
		Short: "Run a command while holding a lease (exit 6 when the lease is lost)",
		Long: `Acquire KEY (waiting for it with --wait), run CMD with the lease's fencing
token in its environment, renew the lease in the background while CMD runs,
release it when CMD ends, and exit with CMD's exit code.

CMD gets LEASESTORE_TOKEN, LEASESTORE_KEY and LEASESTORE_NAMESPACE in its
environment, and leasectl's stdin, stdout and stderr. The lease is renewed
every third of --ttl. If it is lost while CMD runs (revoked, taken over
after an expiry, or a renewal refused or impossible before it runs out),
CMD gets SIGTERM, then SIGKILL after --grace, and run exits 6 (also when
CMD ended first and the release finds the lease gone). A revoke
or a release by another process is heard at once (the store signals it);
the renewal is the fallback. Between the loss and CMD's end (up to
--grace) another holder may start: --lock-delay D (at least --grace plus a
margin) keeps the key from acquires for D after a revoke or expiry.

CMD runs in a process group of its own, and these signals go to the whole
group, so what CMD started stops with it; processes CMD leaves running
when it ends get SIGTERM (SIGKILL after --grace) before the release.
Signals sent to leasectl (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
SIGUSR2) are passed on to the group. In a terminal (run in the foreground
of its controlling terminal, whatever its stdin is) CMD stays in run's
process group, so that job control works as for any command (Ctrl-C and
Ctrl-Z reach CMD directly), and only CMD itself is signalled.

Before CMD starts, run exits as acquire does: 3 when the key is held (or
--wait-timeout passed), 5 when the store cannot answer, 7 when a served
store refuses $` + EnvAPIToken + `, 130 when interrupted. A CMD that cannot
be started exits 127 (not found) or 126. CMD killed by a signal makes run
exit 128 plus the signal's number.`,
		Example: `  leasectl run nightly-report --ttl 1m -- ./report.sh
  leasectl run db-migrations --wait --wait-timeout 10m -- sh -c 'migrate --fencing-token "$LEASESTORE_TOKEN"'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageError("expected KEY -- CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req := protocol.AcquireRequest{Key: keyArg(cmd, ns, args[0]), Owner: owner, TTL: ttl, LockDelay: lockDelay}
			probe := req
			probe.RequestID = orProbe("")
			err := errors.Join(probe.Validate(), w.check(cmd))
			if grace <= 0 {
				err = errors.Join(err, usageError("--grace: must be positive, got %v", grace))
			}
			if err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			return a.run(cmd, req, w, grace, args[1:])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", protocol.DefaultNamespace, "namespace of the key")
	f.StringVar(&owner, "owner", a.defaultOwner, "owner of the lease")
	f.Var(newDurationFlag(&ttl, DefaultTTL), "ttl", "lease duration, renewed every third of it (1ms to 168h)")
	f.Var(newDurationFlag(&grace, DefaultRunGrace), "grace", "after SIGTERM on a lost lease, how long CMD has before SIGKILL")
	f.Var(newDurationFlag(&lockDelay, 0), "lock-delay", "after the lease is revoked or runs out, acquires of the key answer conflict for this long (0 to 1h; default: none, or the namespace default of a served store)")
	w.register(cmd)
	return cmd
}

// run holds req while argv runs; see runCommand.
func (a *app) run(cmd *cobra.Command, req protocol.AcquireRequest, w waitFlags, grace time.Duration, argv []string) error {
	ctx := cmd.Context()
	s, err := a.openStoreFor(ctx, writeAccess)
	if err != nil {
		return err
	}
	defer s.close(a)

	// The hold outlives an interrupt once CMD runs (the signal goes to CMD,
	// which decides); until then, an interrupt or --wait-timeout ends it.
	wctx, cancelWait := w.context(ctx)
	defer cancelWait()
	holdCtx, cancelHold := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelHold(nil)
	stopWatching := context.AfterFunc(wctx, func() { cancelHold(context.Cause(wctx)) })
	hcfg := &protocol.HoldConfig{}
	if w.wait {
		hcfg.Wait = a.waitConfig(req.Key)
	}
	req.RequestID = protocol.NewRequestID() // made here so that a refusal can show it
	h, err := protocol.Hold(holdCtx, s.rt, req, hcfg)
	if !stopWatching() && err == nil {
		// Interrupted (or out of wait time) just as the lease was taken:
		// the hold's context is gone, so the lease goes back.
		_ = h.Release(context.Background())
		if cause := context.Cause(wctx); errors.Is(cause, context.DeadlineExceeded) && ctx.Err() == nil {
			return fail(protocol.StatusConflict, "run: gave up waiting for %s after --wait-timeout %v", req.Key, w.timeout)
		}
		return failWith(context.Cause(wctx))
	}
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			return failWith(err)
		}
		return a.printOutcome(protocol.Result{Op: protocol.OpAcquire, Status: pe.Status, Lease: pe.Lease, Message: pe.Message,
			RequestID: req.RequestID}, err)
	}
	a.log.Debug("run: holding the lease", "key", req.Key.String(), "token", h.Token())

	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = a.stdin, a.rawStdout, a.rawStderr
	// Streams that are not files reach CMD through pipes, which processes
	// CMD leaves running hold open: Wait must not wait for them to end.
	c.WaitDelay = pipeDelay
	c.Env = append(os.Environ(),
		EnvToken+"="+strconv.FormatInt(h.Token(), 10), EnvKey+"="+req.Key.Name, EnvNamespace+"="+req.Key.Namespace)
	var group commandGroup
	group.prepare(c)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	if err := c.Start(); err != nil {
		_ = h.Release(context.Background())
		code := exitCannotExecute
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		fmt.Fprintf(a.stderr, "leasectl: run: %v\n", err)
		return exitCode(code)
	}
	group.started(c.Process)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()

	// Until CMD has ended and no process of its group is left: a loss
	// sends the group SIGTERM, then SIGKILL after grace; processes CMD
	// leaves behind when it ends get the same before the release (a
	// release while they run would let another holder start beside
	// them); signals to run are passed on to the group.
	lost, ended := false, false
	held := h.Context().Done()
	var kill, poll <-chan time.Time
	stop := func() {
		group.signal(syscall.SIGTERM)
		kill = time.After(grace)
	}
	for waiting := true; waiting; {
		select {
		case <-done:
			done, ended = nil, true
			if !group.alive() {
				waiting = false
				break
			}
			if kill == nil {
				a.log.Warn("run: the command ended and left processes running; stopping them", "key", req.Key.String(),
					"signal", "SIGTERM", "kill_after", grace.String())
				stop()
			}
			poll = time.After(groupPoll)
		case <-poll:
			if waiting = group.alive(); waiting {
				poll = time.After(groupPoll)
			}
		case <-held:
			held = nil
			cause := context.Cause(h.Context())
			if !errors.Is(cause, protocol.ErrLeaseLost) {
				continue
			}
			lost = true
			a.log.Error("run: the lease was lost; stopping the command", "key", req.Key.String(), "token", h.Token(),
				"cause", a.red.redact(cause.Error()), "signal", "SIGTERM", "kill_after", grace.String())
			if kill == nil {
				stop()
			}
		case <-kill:
			kill = nil
			a.log.Error("run: the command outlived its grace period; killing it", "key", req.Key.String())
			group.signal(syscall.SIGKILL)
			// Killed processes end at once; left zombies cannot run.
			waiting = !ended
		case sig := <-sigs:
			group.signal(sig)
		}
	}
	code := commandExitCode(c.ProcessState)
	if lost {
		return exitCode(ExitLost)
	}
	if err := h.Release(context.Background()); err != nil {
		// A release the store refuses (the lease was revoked, taken over
		// or ran out, and no signal or renewal told run before CMD ended)
		// is a loss while CMD ran as much as one heard earlier.
		if errors.Is(err, protocol.ErrLeaseLost) || releaseRefused(err) {
			a.log.Error("run: the lease was lost while the command ran", "key", req.Key.String(), "token", h.Token(),
				"cause", a.red.redact(err.Error()))
			return exitCode(ExitLost)
		}
		a.log.Warn("run: releasing the lease failed; it expires after its TTL", "key", req.Key.String(),
			"err", a.red.redact(err.Error()))
	} else {
		a.log.Debug("run: released the lease", "key", req.Key.String(), "token", h.Token())
	}
	if code == 0 {
		return nil
	}
	return exitCode(code)
}

// releaseRefused reports whether err is the store's refusal of a release:
// the lease was no longer the holder's.
func releaseRefused(err error) bool {
	switch protocol.StatusOf(err) {
	case protocol.StatusNotFound, protocol.StatusStaleToken, protocol.StatusNotOwner, protocol.StatusExpired:
		return true
	}
	return false
}

// commandExitCode is a finished command's exit code, or 128 plus the
// signal that ended it, as shells report it.
func commandExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
