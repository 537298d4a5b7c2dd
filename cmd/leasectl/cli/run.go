package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
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
// through pipes that processes CMD left running hold open before it
// closes them: os/exec's, for streams that are not files (as an embedding
// program may pass to Execute), before it stops those processes; run's
// own for stdout with -o json outside a terminal (commandOutput), after
// the release, waiting only for a process outside CMD's group.
const pipeDelay = time.Second

// groupKill is the signal run sends the group when --grace ran out (a
// variable for tests, which stand in for a process that outlives it for a
// while with a signal it ignores).
var groupKill os.Signal = syscall.SIGKILL

// killWait bounds how long run, after SIGKILL, waits for the processes of
// the group to vanish before it releases: a process ends some time after
// the signal (one in the middle of a write to a slow disk or a network
// file system only once that returns). When some are still there after
// it, run does not release: the lease runs out after its TTL (and its
// lock-delay then keeps others out). A variable for tests.
var killWait = 5 * time.Second

// DefaultRunGrace is how long run's command has, after SIGTERM when the
// lease was lost, before SIGKILL.
const DefaultRunGrace = 10 * time.Second

func (a *app) runCommand() *cobra.Command {
	var (
		ns, owner, reqID      string
		ttl, grace, lockDelay time.Duration
		w                     waitFlags
	)
	cmd := &cobra.Command{
		Use:   "run KEY [flags] -- CMD [ARGS...]",
		Short: "Run a command while holding a lease (exit 6 when the lease is lost)",
		Long: `Acquire KEY (waiting for it with --wait), run CMD with the lease's fencing
token in its environment, renew the lease in the background while CMD runs,
release it when CMD ends (bounded by --timeout), and exit with CMD's exit code.

CMD gets LEASESTORE_TOKEN, LEASESTORE_KEY and LEASESTORE_NAMESPACE in its
environment, and leasectl's stdin, stdout and stderr. The lease is renewed
every third of --ttl. If it is lost while CMD runs (revoked, taken over
after an expiry, or a renewal refused or impossible before it runs out),
CMD gets SIGTERM, then SIGKILL after --grace, and run exits 6 (also when
CMD ended first and the release finds the lease gone). A revoke
or a release by another process is heard at once (the store signals it);
the renewal is the fallback. Between the loss and CMD's end (up to
--grace) another holder may start: --lock-delay D (at least --grace plus a
margin) keeps the key from acquires for D after a revoke or expiry. A
lease given up because no renewal answered before it would run out may
still be held in the store (the renewals took effect, their answers were
lost): once CMD's group is gone, run sends the release all the same (one,
bounded by a third of --ttl), so that the key is free at once, and
exits 6 whatever the store answers. When a served store (an http(s) DSN)
refused the renewals' bearer token (HTTP 401 or 403: the token was
withdrawn from its tokens file while CMD ran), or the release's when CMD
ended first, the loss is the same and run exits 7, naming
LEASESTORE_API_TOKEN (the lease runs out after its TTL); so does a
database or etcd cluster that refused the DSN's credentials or their
grants, naming the fix. When CMD ended
with no loss heard and the release gets no answer (the store cut off),
run cannot tell whether the lease was held until CMD ended (a revoke the
store could not signal goes unheard): it says so on stderr, with CMD's
exit code, and exits 5.

Once CMD has started, stdout is CMD's: in table mode run prints nothing
of its own there. With -o json, once CMD has ended and the lease is
released (or found lost), run prints one result object after CMD's
output: status released (exit: CMD's code), the loss's status (exit 6:
not_found, stale_token, not_owner, expired or closed; 7: unauthorized or
forbidden), timeout or unavailable when the release got no answer (exit
5), or found when CMD's group outlived SIGKILL and the lease was left to
run out; its lease, and a message naming CMD's exit code, or the signal
that killed it. The result is stdout's last line: with -o json
CMD's stdout, unless a terminal, is a pipe that run copies, ending CMD's
last line when it did not (in a terminal the result begins with a
newline). What processes CMD leaves running print on that pipe is
copied until they are stopped (below); one outside CMD's group that keeps
it open gets 1s after the release (on a stdout slower than it, until run
copied what the pipe held), then run closes it (its later writes fail:
EPIPE, SIGPIPE); so it does when stdout is closed. A stdout nobody reads holds back CMD's output and
the result, never the renewals, the release or the stop after a loss.

CMD runs in a process group of its own, and these signals go to the whole
group, so what CMD started stops with it; processes CMD leaves running
when it ends get SIGTERM (SIGKILL after --grace) before the release,
which after a SIGKILL waits (up to 5s) until none of them is left; when
some still run then, run does not release and the lease runs out after
its TTL (run reads the key instead, and exits 6 when the lease is gone,
5 when the read gets no answer).
Signals sent to leasectl (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
SIGUSR2) are passed on to the group, which decides: run then exits as
CMD's end and the lease's fate say (6 on a loss, 7 on a withdrawn token),
never 130. In a terminal (run in the foreground
of its controlling terminal, whatever its stdin is) CMD stays in run's
process group, so that job control works as for any command: Ctrl-C,
Ctrl-\ and Ctrl-Z reach CMD directly, from the terminal, as does the
SIGHUP a shell sends its job on a hangup, and only CMD itself is
signalled. There run passes on SIGTERM, SIGUSR1 and SIGUSR2, but not
SIGINT, SIGQUIT or SIGHUP, which CMD got already (passed on, they would
reach it twice), so that kill -INT with leasectl's pid does not reach CMD:
signal CMD or the group (kill -INT -- -PGID). SIGHUP is passed on when run
leads its session (a terminal emulator or tmux started it, or a shell
exec'd it): a hangup then signals run alone.

When leasectl itself is killed (SIGKILL: the OOM killer, a supervisor's
hard stop), nothing renews the lease and it runs out after its TTL. On
Linux CMD gets SIGKILL then; what CMD started does not (it runs on, in
CMD's process group, whose id is CMD's pid outside a terminal), nor does
a CMD that executes a set-user-ID program (sudo), nor any CMD on other
systems. Such processes run on beside the next holder: --lock-delay D
holds that one off for D after the lease ran out, no longer.

--request-id ID makes the acquire idempotent, so that a run whose outcome
was unknown (exit 5: the acquire may have taken the lease) can be run
again with the same ID and the same KEY, --owner, --ttl and --lock-delay:
the acquire is replayed, its lease confirmed with a renew, and CMD runs
under it (its token), without waiting for the lease to run out. Only one
run acts on an ID's lease: while another run with that ID holds it, run
exits 3 without running CMD (the lease is left to that run); so does a
run after one whose claim of the lease took effect but whose answer was
lost (it exited 5), as the two cannot be told apart: the message says when
the lease runs out and how to revoke it. Renewals and the release take ids
of their own. Once the ID's lease has ended, run with it exits 4 without
running CMD, naming the key: run again with a new ID.

Before CMD starts, run exits as acquire does: 3 when the key is held (or
--wait-timeout passed), 5 when the store cannot answer, 7 when a served
store refuses $` + EnvAPIToken + `, 130 when interrupted (status interrupted; while
waiting, with the holder in the output). An interrupt (SIGINT, SIGTERM,
and on Unix SIGHUP and SIGQUIT; or --wait-timeout)
before CMD starts gives the lease back: CMD does not start, and a lease
the acquire took is released at once (under --request-id, only once this
run claimed it), one whose acquire the interrupt cut off in flight after
learning the outcome by sending the acquire again with its request id
(which a late copy of the first then replays: it takes nothing); when the
first took nothing and the key is free, that takes the key and releases it
at once, spending the request id; a conflict names the holder (a waiting
run prints it). Each step is bounded by --timeout. A CMD
that cannot be started (looked up, a script's #! interpreter checked, and
on Linux the file's format, before the lease is taken, so it takes none)
exits 127 (not found) or 126 (also a script without a #! line, or whose
#! line names no interpreter: exec format error), as does a script whose #! interpreter is not found or not
executable (the message names it). CMD killed by a
signal makes run exit 128 plus the signal's number.`,
		Example: `  leasectl run nightly-report --ttl 1m -- ./report.sh
  leasectl run db-migrations --wait --wait-timeout 10m -- sh -c 'migrate --fencing-token "$LEASESTORE_TOKEN"'
  leasectl run nightly-report --request-id "report-$(date +%F)" -- ./report.sh   # retry it after exit 5`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageError("expected KEY -- CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := keyArg(cmd, ns, args[0])
			if err != nil {
				return err
			}
			req := protocol.AcquireRequest{Key: key, Owner: owner, TTL: ttl, LockDelay: lockDelay,
				RequestID: reqID}
			probe := req
			probe.RequestID = orProbe(reqID)
			err = errors.Join(probe.Validate(), w.check(cmd))
			if reqID != "" && len(runClaimID(reqID)) > protocol.MaxRequestIDLen {
				err = errors.Join(err, usageError("--request-id: at most %d bytes, got %d", protocol.MaxRequestIDLen-len(runClaimSuffix), len(reqID)))
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
	f.Var(newDurationFlag(&ttl, DefaultTTL, protocol.MinTTL, protocol.MaxTTL), "ttl", "lease duration, renewed every third of it (1ms to 7d)")
	f.Var(newDurationFlag(&grace, DefaultRunGrace, positive, 0), "grace", "after SIGTERM on a lost lease, how long CMD has before SIGKILL")
	f.Var(newLockDelayFlag(&lockDelay), "lock-delay", "after the lease is revoked or runs out, acquires of the key answer conflict for this long (0 to 1h; default: none, or the namespace default of a served store)")
	f.StringVar(&reqID, "request-id", "", "idempotency key of the acquire: a run again with it after an unknown outcome (exit 5) takes over the lease that acquire took (default: random)")
	w.register(cmd)
	return cmd
}

// runClaimSuffix makes, from the request id a user gave run, the id of
// the renew by which one run claims the lease of that id's acquire.
const runClaimSuffix = "/run"

// runClaimID is the id of the renew by which a run claims the lease of
// its acquire under the request id id (see claimRun).
func runClaimID(id string) string { return id + runClaimSuffix }

// claimRun makes sure that one run acts on the lease of an acquire under a
// request id the user gave. A replayed acquire is confirmed by Hold's
// renew, which succeeds alike for a retry after an unknown outcome (the
// lease nobody runs under: take it over) and for a second run beside the
// first (which must not start CMD under the same token). The claim tells
// them apart: a renew under an id made from the acquire's, which the first
// run to send it makes and every later one finds replayed. It returns nil
// when this run claimed the lease; otherwise it stops holding h, without
// releasing (the lease may be another run's), and returns what to exit with.
func (a *app) claimRun(ctx context.Context, s *store, req protocol.AcquireRequest, h *protocol.Held,
	cancelHold context.CancelCauseFunc) error {
	res, err := a.claim(ctx, s, req, h.Token())
	if err == nil && !res.Replayed {
		return nil
	}
	lease := h.Lease()
	cancelHold(errors.New("run: another run holds the lease"))
	<-h.Done()
	if err != nil {
		return failWith(fmt.Errorf("run: could not tell whether another run with request id %s holds its lease "+
			"(token %d), so the command was not run; the lease runs out after its TTL unless that run renews it: %w",
			req.RequestID, lease.Token, err))
	}
	// The claim's record cannot say which run made it: one beside this
	// one, or an earlier one that never heard its answer and left.
	return a.printOutcome(protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Replayed: true,
		RequestID: req.RequestID, Lease: &lease,
		Message: fmt.Sprintf("the acquire with request id %s took effect earlier and a run with that id claimed its lease "+
			"(token %d): another run still running, or an earlier run with this id whose answer was lost (exit 5); "+
			"the command was not run. If no run with this id is running, the lease runs out at %s unless revoked "+
			"(%s); then run with a new --request-id", req.RequestID, lease.Token,
			lease.ExpiresAt.UTC().Format(time.RFC3339Nano), revokeCommand(lease))}, nil)
}

// claim sends the renew by which a run claims the lease (token) of the
// acquire under the user's request id (see claimRun), bounded by
// --timeout and not cut short by an interrupt: its outcome decides whose
// the lease is. The claim is this run's when it succeeds unreplayed.
func (a *app) claim(ctx context.Context, s *store, req protocol.AcquireRequest, token int64) (protocol.Result, error) {
	cctx, cancel := a.opContext(context.WithoutCancel(ctx))
	defer cancel()
	return s.rt.Renew(cctx, protocol.RenewRequest{Key: req.Key, Owner: req.Owner, Token: token, TTL: req.TTL,
		RequestID: runClaimID(req.RequestID)})
}

// claimedByThisRun claims the lease (token) of the acquire under the
// user's request id for a run stopped before CMD started, and reports
// whether the claim is this run's; when not (refused, replayed, or no
// answer), it logs that the lease, perhaps another run's, is left alone.
func (a *app) claimedByThisRun(ctx context.Context, s *store, req protocol.AcquireRequest, token int64) bool {
	if res, err := a.claim(ctx, s, req, token); err != nil || res.Replayed {
		a.log.Warn("run: stopped before the command started; the lease may be another run's with this request id, "+
			"so it is not released", "key", req.Key.String(), "token", token, "request_id", req.RequestID)
		return false
	}
	return true
}

// releaseHeld releases h's lease at the end of run, bounded by --timeout
// (not by the renewal timeout, a third of --ttl), even after an interrupt.
func (a *app) releaseHeld(ctx context.Context, h *protocol.Held) error {
	rctx, cancel := a.opContext(context.WithoutCancel(ctx))
	defer cancel()
	return h.Release(rctx)
}

// giveBack returns h, the lease run took, when run is stopped (an
// interrupt, or --wait-timeout) before CMD started: it releases the lease
// when it is this run's, which under the user's request id it is only
// once this run claimed it (another run with the id may have); otherwise
// it stops holding it and leaves it alone.
func (a *app) giveBack(ctx context.Context, s *store, req protocol.AcquireRequest, claim bool, h *protocol.Held,
	cancelHold context.CancelCauseFunc) {
	if claim && !a.claimedByThisRun(ctx, s, req, h.Token()) {
		cancelHold(errors.New("run: stopped before the command started"))
		<-h.Done()
		return
	}
	if err := a.releaseHeld(ctx, h); err != nil && !releaseRefused(err) {
		a.log.Warn("run: stopped before the command started; releasing the lease failed: it runs out after its TTL",
			"key", req.Key.String(), "token", h.Token(), "err", a.red.redact(err.Error()))
		return
	}
	a.log.Debug("run: stopped before the command started; released the lease", "key", req.Key.String(), "token", h.Token())
}

// undoAcquire is giveBack after an acquire whose outcome is unknown
// because run was stopped (an interrupt, or --wait-timeout) while it was
// in flight: the acquire may have taken the lease, its answer cut off, or
// may still be on its way to the store. It sends the acquire again under
// the same request id, which replays the first one's outcome, or, when
// that has not taken effect, takes the key now, so that a late copy of the
// first then replays this one and takes nothing; and it releases the
// lease it answers when it is this run's (claimed, under the user's
// request id). Reading the key instead could not tell an acquire that
// took nothing from one not arrived yet, which would then keep the key
// for its TTL with nobody under it (TestRunInterruptedAcquireLandingAfterTheReadIsReleased).
// The price: when the first took nothing and the key is free, the key is
// taken and released at once (a token, two records), and the request id
// is spent. Each step is bounded by --timeout, not cut short by the
// interrupt. It returns the conflict the acquire sent again met, with the
// lease it names: a live holder's, or an ended one whose lock-delay keeps
// the key (nil when none).
func (a *app) undoAcquire(ctx context.Context, s *store, req protocol.AcquireRequest, claim bool) *protocol.Error {
	actx, cancel := a.opContext(context.WithoutCancel(ctx))
	res, err := s.rt.Acquire(actx, req)
	cancel()
	var pe *protocol.Error
	switch st := protocol.StatusOf(err); {
	case err == nil && res.Lease != nil:
	case st == protocol.StatusTimeout || st == protocol.StatusUnavailable:
		a.log.Warn("run: stopped while acquiring, and the acquire's outcome could not be learned: a lease it took "+
			"runs out after its TTL", "key", req.Key.String(), "request_id", req.RequestID, "err", a.red.redact(err.Error()))
		return nil
	case st == protocol.StatusConflict && errors.As(err, &pe) && pe.Lease != nil:
		// The key is held by another (or under another request id), or
		// kept by a lock-delay: the acquire took nothing.
		return pe
	default:
		return nil // refused: it took nothing
	}
	l := *res.Lease
	if claim && !a.claimedByThisRun(ctx, s, req, l.Token) {
		return nil
	}
	rctx, cancel := a.opContext(context.WithoutCancel(ctx))
	defer cancel()
	_, err = s.rt.Release(rctx, protocol.ReleaseRequest{Key: req.Key, Owner: req.Owner, Token: l.Token})
	if err != nil && !releaseRefused(err) {
		a.log.Warn("run: stopped before the command started; releasing the lease its acquire took failed: it runs out "+
			"after its TTL", "key", req.Key.String(), "token", l.Token, "err", a.red.redact(err.Error()))
		return nil
	}
	a.log.Debug("run: stopped while acquiring; released the lease the acquire took", "key", req.Key.String(),
		"token", l.Token, "replayed", res.Replayed)
	return nil
}

// stoppedBeforeCommand is what run exits with when wctx ended before CMD
// started: conflict after --wait-timeout, else interrupted (130).
func stoppedBeforeCommand(ctx, wctx context.Context, req protocol.AcquireRequest, w waitFlags) error {
	if cause := context.Cause(wctx); errors.Is(cause, context.DeadlineExceeded) && ctx.Err() == nil {
		return fail(protocol.StatusConflict, "run: gave up waiting for %s after --wait-timeout %s", req.Key, shortDuration(w.timeout))
	}
	return failWith(context.Cause(wctx))
}

// stoppedWaiting is the result of run --wait stopped (an interrupt, or
// --wait-timeout) while an attempt was in flight, with met the conflict
// the acquire sent again met: conflict, which interruptedWait turns into
// interrupted after an interrupt, as for a wait stopped while asleep. A
// conflict the store said a lock-delay caused stays one
// ([protocol.Error.KeptByLockDelay]), saying when the key is free (or,
// past that, that the store has not yet freed it). The message does not
// name the key: the result's Key does.
func stoppedWaiting(req protocol.AcquireRequest, w waitFlags, met *protocol.Error) protocol.Result {
	l := *met.Lease
	gaveUp := fmt.Sprintf("gave up waiting after --wait-timeout %s", shortDuration(w.timeout))
	// Judged now: past the end of the lock-delay or the expiry (a store
	// that sees them late, never early), it says the store has not yet
	// freed the key rather than a time already past.
	var msg string
	switch now := time.Now(); {
	case met.KeptByLockDelay():
		msg = protocol.LockDelayPrefix + gaveUp + ": " + l.LockDelayText(now)
	case l.LiveAt(now):
		msg = fmt.Sprintf("%s: held by %s with token %d until %s", gaveUp, lineValue(l.Owner), l.Token, l.ExpiresAt.UTC().Format(time.RFC3339Nano))
	default:
		msg = gaveUp + ": " + l.ExpiredText()
	}
	return protocol.Result{Op: protocol.OpAcquire, Status: protocol.StatusConflict, Key: req.Key, Lease: &l,
		RequestID: req.RequestID, Message: msg}
}

// revokeCommand is the leasectl command line that revokes l, to paste.
func revokeCommand(l protocol.Lease) string {
	key := shellQuote(l.Key.Name)
	if l.Key.Namespace != protocol.DefaultNamespace || strings.Contains(l.Key.Name, "/") {
		key = "-n " + shellQuote(l.Key.Namespace) + " " + key
	}
	return fmt.Sprintf("leasectl revoke %s --token %d --reason REASON", key, l.Token)
}

// cannotStart says on stderr why CMD could not be started (err, from
// exec.LookPath, checkInterpreter or the start) and returns the exit code
// a shell gives: 127 when CMD is not found, else 126. With -o json run
// answers as acquire does before CMD runs: its one object is a result
// (failureJSON), the reason on stderr too, with requestID: the
// --request-id given when nothing reached the store, else the acquire's.
func (a *app) cannotStart(err error, requestID string) error {
	code := exitCannotExecute
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		code = exitNotFound
	}
	if a.output == "json" {
		a.printJSON(failureJSON("run", StatusError, a.red.redact("run: "+err.Error()), requestID))
	}
	fmt.Fprintf(a.stderr, "leasectl: run: %v\n", err)
	return exitCode(code)
}

// interruptOn makes sigs interrupt the command (a.interrupt, the cause
// naming the signal, as main's SIGINT and SIGTERM do) until stop is
// called; stop returns once no signal can interrupt it any more, having
// interrupted it for a signal that came before. Nothing is done for no
// signals.
func (a *app) interruptOn(sigs []os.Signal) (stop func()) {
	if len(sigs) == 0 || a.interrupt == nil {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	quit, done := make(chan struct{}), make(chan struct{})
	interrupt := func(sig os.Signal) { a.interrupt(errors.New(sig.String() + " signal received")) }
	go func() {
		defer close(done)
		select {
		case sig := <-ch:
			interrupt(sig)
		case <-quit:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(quit)
			<-done
			select {
			case sig := <-ch:
				interrupt(sig)
			default:
			}
		})
	}
}

// run holds req while argv runs; see runCommand.
func (a *app) run(cmd *cobra.Command, req protocol.AcquireRequest, w waitFlags, grace time.Duration, argv []string) error {
	ctx := cmd.Context()
	// CMD is looked up as exec.Command will (exec.LookPath), a script's
	// interpreter checked, and the format of the file to execute (on
	// Linux), before the store is opened: one that
	// cannot be started takes no lease (no acquire and release in the
	// trail, no wait for the key). One that goes missing after this is
	// still told when it fails to start.
	path, err := exec.LookPath(argv[0])
	if err == nil {
		// A script whose #! line names an interpreter that cannot run
		// cannot start either.
		err = checkInterpreter(path)
	}
	if err != nil {
		return a.cannotStart(err, givenRequestID(cmd))
	}
	// Until CMD starts, SIGHUP and SIGQUIT interrupt run as SIGINT and
	// SIGTERM do: a lease it took goes back, CMD does not start.
	stopInterrupts := a.interruptOn(stopSignals)
	defer stopInterrupts()
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
	claim := req.RequestID != "" // the user's id: another run may send it too
	if !claim {
		req.RequestID = protocol.NewRequestID() // made here so that a refusal can show it
	}
	h, err := protocol.Hold(holdCtx, s.rt, req, hcfg)
	if !stopWatching() {
		// Interrupted (or out of wait time) before CMD started: a lease
		// the acquire took goes back at once, rather than keeping the key
		// from everyone for its TTL (and then its lock-delay) with nobody
		// working under it. Taken just as the hold's context went: release
		// it. Cut off in flight (the outcome unknown: the acquire may have
		// taken the lease, or be still on its way): send it again with
		// its request id and release what that answers (undoAcquire).
		// Under the user's request id, only a lease this run claimed
		// (another run with the id may have). A wait so stopped names the
		// holder a conflict names, as a wait stopped while asleep does.
		switch st := protocol.StatusOf(err); {
		case err == nil:
			a.giveBack(ctx, s, req, claim, h, cancelHold)
			return stoppedBeforeCommand(ctx, wctx, req, w)
		case st == protocol.StatusTimeout || st == protocol.StatusUnavailable:
			if met := a.undoAcquire(ctx, s, req, claim); met != nil && w.wait {
				return a.printOutcome(interruptedWait(ctx, stoppedWaiting(req, w, met)), nil)
			}
			return stoppedBeforeCommand(ctx, wctx, req, w)
		}
	}
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			return failWith(err)
		}
		res := protocol.Result{Op: protocol.OpAcquire, Status: pe.Status, Key: req.Key, Lease: pe.Lease,
			Message: pe.Message, RequestID: req.RequestID}
		if claim && pe.Op == protocol.OpRenew && !pe.Status.Success() {
			// Hold's confirmation of a replayed acquire was refused: the
			// lease that acquire took under the user's id has ended.
			res.Message = fmt.Sprintf("the acquire of %s with request id %s took effect earlier and its lease has ended "+
				"(%s); the command was not run: run again with a new --request-id", req.Key, req.RequestID, pe.Message)
		}
		return a.printOutcome(interruptedWait(ctx, res), err)
	}
	if claim {
		if err := a.claimRun(ctx, s, req, h, cancelHold); err != nil {
			return err
		}
	}
	a.log.Debug("run: holding the lease", "key", req.Key.String(), "token", h.Token())

	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = a.stdin, a.rawStdout, a.rawStderr
	if a.output == "json" {
		// run's result must begin a line of its own (tail -n 1 prints
		// it): CMD's output, unless it goes to a terminal, passes through
		// run, which sees whether it ended a line. Through a pipe and a
		// copy of run's own, not os/exec's: Wait would wait for its copy
		// into a stdout nobody reads, and the release (or the stop after
		// a loss) with it.
		if f, ok := a.rawStdout.(*os.File); !ok || !isatty.IsTerminal(f.Fd()) {
			out, err := newCommandOutput(a.rawStdout)
			if err != nil {
				_ = a.releaseHeld(ctx, h)
				return a.cannotStart(fmt.Errorf("a pipe for the command's output: %w", err), req.RequestID)
			}
			a.cmdOut = out
			c.Stdout = out.child
			defer out.finish()
		}
	}
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
	// From here on they are passed on to CMD (sigs has them); one that
	// came before is an interrupt, seen below.
	stopInterrupts()
	if ctx.Err() != nil {
		// Interrupted after the acquire (or during the claim, which an
		// interrupt does not cut short) and before CMD started: CMD does
		// not start, and the lease, this run's, goes back. From here on
		// an interrupt is passed on to CMD, which decides.
		a.giveBack(ctx, s, req, false, h, cancelHold)
		return failWith(context.Cause(ctx))
	}
	done, err := startCommand(c)
	if a.cmdOut != nil {
		a.cmdOut.started()
	}
	if err != nil {
		_ = a.releaseHeld(ctx, h)
		if ierr := checkInterpreter(c.Path); ierr != nil {
			err = ierr // the script is there: name what is missing
		}
		// The acquire and the release reached the store: the result
		// names their request id.
		return a.cannotStart(err, req.RequestID)
	}
	group.started(c.Process)
	a.commandStarted = true

	// Until CMD has ended and no process of its group is left: a loss
	// sends the group SIGTERM, then SIGKILL after grace; processes CMD
	// leaves behind when it ends get the same before the release (a
	// release while they run would let another holder start beside
	// them); signals to run are passed on to the group (in a terminal,
	// those the group did not get directly).
	lost, survived := false, false
	var lostCause error // why the lease was lost, once lost
	held := h.Context().Done()
	var kill, poll <-chan time.Time
	var reapBy time.Time // once the group got SIGKILL: until when it may take to vanish
	stop := func() {
		group.signal(syscall.SIGTERM)
		kill = time.After(grace)
	}
	for waiting := true; waiting; {
		select {
		case <-done:
			done = nil
			if !group.alive() {
				waiting = false
				break
			}
			if kill == nil && reapBy.IsZero() {
				a.log.Warn("run: the command ended and left processes running; stopping them", "key", req.Key.String(),
					"signal", "SIGTERM", "kill_after", shortDuration(grace))
				stop()
			}
			poll = time.After(groupPoll)
		case <-poll:
			switch {
			case done == nil && !group.alive():
				waiting = false
			case !reapBy.IsZero() && !time.Now().Before(reapBy):
				waiting, survived = false, true
			default:
				poll = time.After(groupPoll)
			}
		case <-held:
			held = nil
			cause := context.Cause(h.Context())
			if !errors.Is(cause, protocol.ErrLeaseLost) {
				continue
			}
			lost, lostCause = true, cause
			a.log.Error("run: the lease was lost; stopping the command", "key", req.Key.String(), "token", h.Token(),
				"cause", a.red.redact(cause.Error()), "signal", "SIGTERM", "kill_after", shortDuration(grace))
			if kill == nil {
				stop()
			}
		case <-kill:
			kill = nil
			a.log.Error("run: the command outlived its grace period; killing it", "key", req.Key.String())
			group.signal(groupKill)
			// Killed processes end soon, not at once: the release waits
			// until none of the group, CMD included, is left (zombies
			// cannot run), for up to killWait from now, CMD itself too
			// (it may not have ended yet).
			reapBy = time.Now().Add(killWait)
			poll = time.After(groupPoll)
		case sig := <-sigs:
			if group.forwards(sig) {
				group.signal(sig)
			}
		}
	}
	// CMD's code once Wait returned (done nil: its ProcessState is set);
	// else CMD itself outlived the kill's bound, which only a loss (exit 6)
	// leads to.
	code := 1
	var ps *os.ProcessState // nil while CMD has not been waited for
	if done == nil {
		ps = c.ProcessState
		code = commandExitCode(ps)
	}
	if survived {
		a.log.Error("run: processes of the command still run after SIGKILL; not releasing the lease: it runs out after its TTL",
			"key", req.Key.String(), "token", h.Token(), "waited", killWait.String())
		if !lost {
			// No release tells of a loss no signal or renewal told of.
			cause, unanswered := a.lostUnheard(ctx, s, h)
			switch {
			case cause != nil:
				a.log.Error("run: the lease was lost while the command ran", "key", req.Key.String(), "token", h.Token(),
					"cause", a.red.redact(cause.Error()))
				lost, lostCause = true, cause
			case unanswered != nil:
				return a.outcomeUnknown("the read of the key got no answer", req, h, ps, code, unanswered)
			}
		}
		if lost {
			return a.lostOutcome(req, h, lostCause, ps)
		}
		l := h.Lease()
		return a.ranOutcome(protocol.Result{Op: protocol.OpGet, Status: protocol.StatusFound, Key: req.Key, Lease: &l,
			RequestID: req.RequestID, Message: fmt.Sprintf("processes of the command still run after SIGKILL, so the lease "+
				"was not released: it runs out at %s; %s", l.ExpiresAt.UTC().Format(time.RFC3339Nano), commandEnded(ps))},
			commandExit(code))
	}
	if lost {
		// Lost by the local clock (no renewal answered), the lease may
		// still be live in the store: now that the command's group is
		// gone, Release sends the release (bounded by the renewal
		// timeout), so that the key is free at once, not after the TTL
		// and the lock-delay. A lease the store ended is not released
		// again; either way Release answers the loss.
		_ = h.Release(context.Background())
		return a.lostOutcome(req, h, lostCause, ps)
	}
	if err := a.releaseHeld(ctx, h); err != nil {
		// A release the store refuses (the lease was revoked, taken over
		// or ran out, and no signal or renewal told run before CMD ended)
		// is a loss while CMD ran as much as one heard earlier.
		if errors.Is(err, protocol.ErrLeaseLost) || releaseRefused(err) {
			a.log.Error("run: the lease was lost while the command ran", "key", req.Key.String(), "token", h.Token(),
				"cause", a.red.redact(err.Error()))
			return a.lostOutcome(req, h, err, ps)
		}
		// A served store that refuses the bearer token (withdrawn while
		// CMD ran) is the loss a refused renewal is: the lease, which run
		// can neither renew nor release, stays until it runs out.
		if authFailure(err) != nil {
			a.log.Error("run: the store refused the release's bearer token: the lease runs out after its TTL",
				"key", req.Key.String(), "token", h.Token(), "cause", a.red.redact(err.Error()))
			return a.lostOutcome(req, h, err, ps)
		}
		// No answer (the store cut off): the lease may have been lost
		// while CMD ran, unheard (a revoke the store could not signal),
		// or held to the end. CMD's code would claim the latter.
		return a.outcomeUnknown("the release got no answer", req, h, ps, code, err)
	}
	a.log.Debug("run: released the lease", "key", req.Key.String(), "token", h.Token())
	l := h.Lease()
	return a.ranOutcome(protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusReleased, Key: req.Key, Lease: &l,
		RequestID: req.RequestID, Message: commandEnded(ps) + "; the lease was released"}, commandExit(code))
}

// commandExit is what run exits with when CMD ended with code and the
// lease was held throughout: CMD's code.
func commandExit(code int) error {
	if code == 0 {
		return nil
	}
	return exitCode(code)
}

// commandEnded says how CMD ended (ps, nil when it outlived SIGKILL), for
// run's result: its exit code, or the signal that killed it (run's code
// is then 128 plus its number, which CMD never exited with).
func commandEnded(ps *os.ProcessState) string {
	if ps == nil {
		return "the command outlived SIGKILL"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("the command was killed by signal %s (%d)", signalName(ws.Signal()), int(ws.Signal()))
	}
	return fmt.Sprintf("the command exited %d", ps.ExitCode())
}

// ranOutcome is run's end once CMD has ended (or outlived SIGKILL): with
// -o json it prints res, run's one result, on stdout after CMD's output,
// on a line of its own (after a newline when CMD's output did not end
// one, or went to a terminal),
// and returns what run exits with (ret) without Execute printing it
// again; in table mode it returns ret (a failure Execute prints on stderr,
// or the exit code alone), and stdout holds CMD's output alone.
func (a *app) ranOutcome(res protocol.Result, ret error) error {
	if a.output != "json" {
		return ret
	}
	if a.cmdOut != nil {
		a.cmdOut.finish() // CMD's output comes first
	}
	if a.cmdOut == nil || a.cmdOut.midLine() {
		// After output that did not end a line, or in a terminal, where
		// run cannot see it: the result begins a line of its own.
		fmt.Fprintln(a.stdout)
	}
	a.printJSON(toResultJSON(res, a.red.redact(res.Message)))
	var f *failure
	if errors.As(ret, &f) {
		return reported{status: f.status}
	}
	return ret
}

// lostOutcome is run's end when its lease was lost while CMD ran (cause
// why): exit 6, or 7 when the store refused the credentials (lostExit).
// Its result has the loss's status with the lease the store named, else
// the one run held: the store's refusal of the renewal or release
// (not_found, stale_token, not_owner, expired), closed, or unauthorized
// or forbidden; expired when the store gave none (run gave the lease up by
// its clock, no renewal having answered, or the store signalled its end
// and another holder took the key: the message says which).
func (a *app) lostOutcome(req protocol.AcquireRequest, h *protocol.Held, cause error, ps *os.ProcessState) error {
	ret := lostExit(cause)
	l := h.Lease()
	res := protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusExpired, Key: req.Key, Lease: &l, RequestID: req.RequestID,
		Message: fmt.Sprintf("the lease was lost while the command ran (%s); %s", describeErr(cause), commandEnded(ps))}
	var pe *protocol.Error
	var f *failure
	switch {
	case errors.As(ret, &f):
		res.Status = protocol.Status(f.status)
		res.Message = fmt.Sprintf("%s; the lease can be neither renewed nor released and runs out after its TTL; %s",
			f.Error(), commandEnded(ps))
	case errors.As(cause, &pe):
		switch pe.Status {
		case protocol.StatusNotFound, protocol.StatusStaleToken, protocol.StatusNotOwner, protocol.StatusExpired, protocol.StatusClosed:
			res.Status = pe.Status
			if pe.Lease != nil {
				res.Lease = pe.Lease
			}
		}
	}
	return a.ranOutcome(res, ret)
}

// lostUnheard tells run, which does not release h's lease because
// processes of CMD's group outlived SIGKILL, of a loss that neither the
// store's signal nor a renewal told it of while CMD ran: the loss h heard
// since, or else one a read of the key (bounded by --timeout) finds (no
// live lease, or another's; a served store refusing the bearer token). It
// returns lost nil when the key still holds h's lease, and unanswered, the
// read's error, when the read got no answer (timeout, unavailable): then
// whether the lease was lost is unknown.
func (a *app) lostUnheard(ctx context.Context, s *store, h *protocol.Held) (lost, unanswered error) {
	if cause := context.Cause(h.Context()); errors.Is(cause, protocol.ErrLeaseLost) {
		return cause, nil
	}
	gctx, cancel := a.opContext(context.WithoutCancel(ctx))
	defer cancel()
	l := h.Lease()
	res, err := s.rt.Get(gctx, protocol.GetRequest{Key: l.Key})
	switch {
	case err == nil && res.Lease != nil && res.Lease.Token == h.Token():
		return nil, nil
	case err == nil && res.Lease != nil:
		return fmt.Errorf("run: %s holds %s with token %d", lineValue(res.Lease.Owner), l.Key, res.Lease.Token), nil
	case protocol.StatusOf(err) == protocol.StatusNotFound, authFailure(err) != nil:
		return err, nil
	case err != nil:
		return nil, err
	}
	return nil, nil
}

// outcomeUnknown is run's end when, with no loss heard, the store did not
// answer the call that would tell whether the lease was held until CMD
// ended (what, the release or the read of the key; err its error): a
// loss the store could not signal (a revoke while it was cut off) would
// have gone unheard. It says so on stderr, with CMD's exit code (code)
// when CMD ended (ps, its state; nil when it outlived SIGKILL), and exits
// 5, as for any answer the store did not give, rather than CMD's code,
// which would claim the lease held throughout.
func (a *app) outcomeUnknown(what string, req protocol.AcquireRequest, h *protocol.Held, ps *os.ProcessState, code int, err error) error {
	attrs := []any{"key", req.Key.String(), "token", h.Token()}
	if ps != nil {
		attrs = append(attrs, "command_exit", code, "command", commandEnded(ps))
	}
	attrs = append(attrs, "err", a.red.redact(err.Error()))
	a.log.Error("run: "+what+", so whether the lease was held until the command ended is unknown (a revoke the store "+
		"could not signal goes unheard); exiting 5, not the command's code. A lease still held runs out after its TTL", attrs...)
	l := h.Lease()
	return a.ranOutcome(protocol.Result{Op: protocol.OpRelease, Status: protocol.StatusOf(err), Key: req.Key, Lease: &l,
		RequestID: req.RequestID, Message: fmt.Sprintf("%s, so whether the lease was held until the command ended is unknown "+
			"(a revoke the store could not signal goes unheard; a lease still held runs out after its TTL): %s; %s",
			what, describeErr(err), commandEnded(ps))}, exitCode(ExitUnavailable))
}

// lostExit is run's end after its lease was lost for cause: exit 7 naming
// the bearer token when a served store refused it (the renewals were
// refused with 401 or 403: the token was withdrawn while CMD ran), or the
// fix when the store refused the DSN's credentials or their grants
// (authFailure); exit 6 otherwise.
func lostExit(cause error) error {
	if refused := authFailure(cause); refused != nil {
		return refused
	}
	return exitCode(ExitLost)
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

// lineEndWriter passes run's command's output to w and remembers whether
// it ended a line (safe for concurrent use: commandOutput's copy, which
// processes CMD left behind may keep going, writes from a goroutine).
type lineEndWriter struct {
	w       io.Writer
	mu      sync.Mutex
	wrote   bool  // some output was written
	last    byte  // the last byte written
	writing bool  // a Write to w is under way
	copied  int64 // bytes written to w
}

func (l *lineEndWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.writing = true
	l.mu.Unlock()
	n, err := l.w.Write(b)
	l.mu.Lock()
	l.writing = false
	if n > 0 {
		l.wrote, l.last = true, b[n-1]
		l.copied += int64(n)
	}
	l.mu.Unlock()
	return n, err
}

// commandOutput is run's copy of CMD's stdout to w with -o json: CMD
// writes into a pipe (child), and a goroutine of run's copies what it
// reads to w through a lineEndWriter. CMD's end (Wait) does not wait for
// the copy, so that nothing of the lease's handling waits for a stdout
// nobody reads; run's result, printed after CMD's output, does (finish).
type commandOutput struct {
	lineEndWriter
	r, child *os.File
	capacity int64         // what the pipe holds (pipeCapacity)
	done     chan struct{} // closed when the copy ended
}

func newCommandOutput(w io.Writer) (*commandOutput, error) {
	r, child, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	o := &commandOutput{lineEndWriter: lineEndWriter{w: w}, r: r, child: child, capacity: pipeCapacity(r),
		done: make(chan struct{})}
	go func() {
		defer close(o.done)
		_, _ = io.Copy(&o.lineEndWriter, r)
		// At the end of what CMD's processes write, or when w refused a
		// write (a stdout closed: CMD's next write then fails, EPIPE,
		// SIGPIPE, as os/exec's copy has it), the read end goes too.
		_ = r.Close()
	}()
	return o, nil
}

// maxPipeCapacity bounds what a pipe can hold where its capacity cannot
// be read: Linux's default pipe-max-size, above macOS's 64 KiB.
const maxPipeCapacity = 1 << 20

// copyBuffer is io.Copy's buffer: what the copy may hold read and not yet
// written.
const copyBuffer = 32 << 10

// started closes run's copy of the pipe's write end once CMD has its own
// (or did not start), so that the copy ends when CMD's processes have.
func (o *commandOutput) started() { _ = o.child.Close() }

// finish returns once the copy ended: every process holding the pipe's
// write end has ended and what they wrote reached w. It is called once
// CMD's group is gone, so what CMD's processes wrote is at most what the
// pipe holds and the copy has read: that reaches w however long w takes
// to take it. A process outside CMD's group (which run stops) may keep
// the pipe open: once the copy has waited pipeDelay for more to read, or
// has written more than the pipe and the copy could hold since finish
// began (what it writes then is that process's), run closes its end, as
// os/exec does after WaitDelay, and what such a process writes later is
// lost. Safe to call more than once.
func (o *commandOutput) finish() {
	o.mu.Lock()
	limit := o.copied + o.capacity + copyBuffer
	o.mu.Unlock()
	for {
		select {
		case <-o.done:
			return
		case <-time.After(pipeDelay):
		}
		o.mu.Lock()
		writing, past := o.writing, o.copied > limit
		o.mu.Unlock()
		if !writing || past {
			_ = o.r.Close()
			<-o.done
			return
		}
	}
}

// midLine reports whether the output written so far does not end a line.
func (l *lineEndWriter) midLine() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wrote && l.last != '\n'
}
