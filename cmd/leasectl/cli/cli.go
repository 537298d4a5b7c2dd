// Package cli implements leasectl, leasestore's operator command line: the
// cobra command tree, DSN handling, output (tables or one JSON object per
// command) and exit codes, as pinned by the "leasectl contract" in
// DESIGN.md. cmd/leasectl/main.go only calls [Execute].
//
// Every command writes to the writers given to [Execute] and logs through a
// *slog.Logger on stderr, so commands are tested in-process by capturing
// output in buffers. Nothing here keeps global state: concurrent calls to
// Execute are independent.
//
// Exit codes: 0 success (acquired, renewed, released, revoked, found,
// healthy, ok, pruned, serving); 2 invalid input or usage; 3 conflict; 4 not_found,
// stale_token, not_owner, expired; 5 timeout, unavailable, closed; 6 (run)
// the lease was lost while the command ran; 7 unauthorized or forbidden (a
// served store refused the bearer token, or a database or etcd cluster the
// DSN's credentials or their privileges); 130
// interrupted (Ctrl-C); 141 stdout closed under the command (silent); 1
// anything else (status "error"), a failed write to stdout included.
//
// Library packages must not import this package: it imports every backend.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// Exit codes, as pinned by DESIGN.md.
const (
	ExitOK          = 0 // acquired, renewed, released, revoked, found, healthy, ok, pruned, serving
	ExitError       = 1 // anything else
	ExitUsage       = 2 // invalid input or usage
	ExitConflict    = 3 // conflict
	ExitRefused     = 4 // not_found, stale_token, not_owner, expired
	ExitUnavailable = 5 // timeout, unavailable, closed
	ExitLost        = 6 // run: the lease was lost while the command ran
	ExitAuth        = 7 // unauthorized or forbidden: the bearer token (HTTP 401/403), the DSN's credentials or their grants refused
	// ExitInterrupted is what a command ends with when its context was
	// cancelled (Ctrl-C) before it finished: 128+SIGINT, as a shell reports
	// a process that SIGINT ended.
	ExitInterrupted = 130
	// ExitStdoutClosed is what a command ends with, silently, when its
	// stdout was closed under it (leasectl demo | head): 128+SIGPIPE, as a
	// shell reports a process that SIGPIPE ended.
	ExitStdoutClosed = 141
)

// errStdoutClosed is the cause of a command's context when a write to its
// stdout found the reader gone.
var errStdoutClosed = errors.New("leasectl: stdout was closed")

// stdoutFailed is the cause of a command's context when a write to its
// stdout failed otherwise (a full disk, a closed descriptor): what the
// command printed did not all arrive, so it must not exit 0.
type stdoutFailed struct{ err error }

func (e stdoutFailed) Error() string { return "writing to stdout: " + e.err.Error() }
func (e stdoutFailed) Unwrap() error { return e.err }

// pipeWatch passes writes to w and cancels the command when one fails:
// with cause errStdoutClosed when it finds the reading end of a pipe
// closed (EPIPE), else with cause [stdoutFailed]. The first cause stays.
type pipeWatch struct {
	w      io.Writer
	cancel context.CancelCauseFunc
}

func (p *pipeWatch) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	switch {
	case errors.Is(err, syscall.EPIPE):
		p.cancel(errStdoutClosed)
	case err != nil:
		p.cancel(stdoutFailed{err})
	}
	return n, err
}

// Statuses leasectl prints besides the protocol's vocabulary.
const (
	StatusHealthy = "healthy" // health: the store answered
	StatusOK      = "ok"      // migrate, demo, version: the command did its job
	StatusError   = "error"   // any failure outside the vocabulary (exit 1)
	// StatusUnauthorized and StatusForbidden: a served store (--dsn
	// http://...) refused the request for its bearer token, $LEASESTORE_API_TOKEN:
	// none or an unknown one (HTTP 401), or one not allowed to do that
	// (HTTP 403); or a database refused the DSN's role, user or password
	// (unauthorized) or their privileges, permission (forbidden). Exit 7,
	// never 5: a bad credential is not an outage.
	StatusUnauthorized = "unauthorized"
	StatusForbidden    = "forbidden"
	// StatusInterrupted: Ctrl-C (or the caller's context) ended the command
	// before it had an answer to print (exit 130).
	StatusInterrupted = "interrupted"
)

// DefaultDSN is the store leasectl uses when neither --dsn nor
// LEASESTORE_DSN is set: a SQLite file in the working directory, created
// and migrated on first use.
const DefaultDSN = "sqlite:leasestore.db"

// EnvDSN is the environment variable read when --dsn is not given.
const EnvDSN = "LEASESTORE_DSN"

// ExitCode returns the process exit code for a status printed by leasectl.
func ExitCode(status string) int {
	switch status {
	case string(protocol.StatusAcquired), string(protocol.StatusRenewed), string(protocol.StatusReleased),
		string(protocol.StatusRevoked), string(protocol.StatusFound), StatusHealthy, StatusOK:
		return ExitOK
	case string(protocol.StatusInvalid):
		return ExitUsage
	case string(protocol.StatusConflict):
		return ExitConflict
	case string(protocol.StatusNotFound), string(protocol.StatusStaleToken), string(protocol.StatusNotOwner),
		string(protocol.StatusExpired):
		return ExitRefused
	case string(protocol.StatusTimeout), string(protocol.StatusUnavailable), string(protocol.StatusClosed):
		return ExitUnavailable
	case StatusUnauthorized, StatusForbidden:
		return ExitAuth
	case StatusInterrupted:
		return ExitInterrupted
	}
	return ExitError
}

// failure is an error that Execute prints (as text or one JSON object) with
// its status, and turns into the status's exit code.
type failure struct {
	status string
	err    error
	msg    string // shown instead of err's text when set
}

func (f *failure) Error() string {
	if f.msg != "" {
		return f.msg
	}
	return f.err.Error()
}
func (f *failure) Unwrap() error { return f.err }

// fail returns a *failure with status and a formatted error.
func fail(status protocol.Status, format string, args ...any) error {
	return &failure{status: string(status), err: fmt.Errorf(format, args...)}
}

// usageError marks bad input found by a command itself (exit 2).
func usageError(format string, args ...any) error {
	return fail(protocol.StatusInvalid, format, args...)
}

// cannot is the failure of a command that the store s cannot run (gc,
// audit prune through a served store): a usage error (exit 2), since the
// store answered and a retry cannot help; a served store's names the DSN
// to use instead.
func cannot(s *store, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if s.backend == "http" {
		msg += ": run it with the database's DSN (the DSN leasectl serve was given)"
	}
	return usageError("%s", msg)
}

// failWith wraps err with the status it carries: timeout for deadlines and
// cancellation, the status of a *protocol.Error, unavailable otherwise.
func failWith(err error) error {
	var f *failure
	if errors.As(err, &f) {
		return err
	}
	if refused := authFailure(err); refused != nil {
		return refused
	}
	status := protocol.StatusOf(err)
	return &failure{status: string(status), err: err, msg: string(status) + ": " + describeErr(err)}
}

// authFailure returns the failure (exit 7) of err when it is a store's
// refusal of the credentials or their permission: a served store's of the
// bearer token (naming the variable that carries it), or a backend's of
// the DSN's role, user, password or grants (matching
// protocol.ErrUnauthenticated or ErrForbidden, its message naming the
// fix); nil otherwise.
func authFailure(err error) error {
	var refused *httpapi.RefusedError
	if !errors.As(err, &refused) {
		if status := authStatus(err); status != "" {
			return &failure{status: status, err: err, msg: status + ": " + describeErr(err)}
		}
		return nil
	}
	switch refused.Status {
	case httpapi.StatusUnauthorized:
		return &failure{status: StatusUnauthorized, err: err, msg: fmt.Sprintf("unauthorized: the server refused the bearer token "+
			"(HTTP 401: %s): set %s to a token of the server's tokens file", refused.Message, EnvAPIToken)}
	case httpapi.StatusForbidden:
		return &failure{status: StatusForbidden, err: err, msg: fmt.Sprintf("forbidden: the server does not allow this to the bearer "+
			"token in %s (HTTP 403: %s)", EnvAPIToken, refused.Message)}
	}
	return nil
}

// authStatus returns the status (unauthorized, forbidden) of err when it
// matches protocol.ErrUnauthenticated or ErrForbidden, "" otherwise.
func authStatus(err error) string {
	switch {
	case errors.Is(err, protocol.ErrUnauthenticated):
		return StatusUnauthorized
	case errors.Is(err, protocol.ErrForbidden):
		return StatusForbidden
	}
	return ""
}

// describeErr renders err for people: a *protocol.Error's message and
// cause ([protocol.Error.Detail]; by the error's rule neither repeats the
// other), anything else's text.
func describeErr(err error) string {
	if pe, ok := err.(*protocol.Error); ok {
		return pe.Detail()
	}
	return err.Error()
}

// reported is returned by a command that already printed its outcome; it
// only carries the status for the exit code.
type reported struct{ status string }

func (r reported) Error() string { return "leasectl: " + r.status }

// app holds one invocation's writers, settings and state. It is not shared
// between invocations.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// rawStdout and rawStderr are the streams as Execute got them, for a
	// child process (run) whose output is its own.
	rawStdout, rawStderr io.Writer
	getenv               func(string) string
	log                  *slog.Logger
	red                  *redactor

	// global flags
	dsnFlag  string
	output   string
	timeout  time.Duration
	logLevel string

	defaultOwner string
	ran          bool // a command's own code started (errors before that are usage errors); see markRun
	// commandStarted: run's command started. From then on an interrupt is
	// passed on to it, which decides: run ends as CMD's end and the
	// lease's fate say, not as interrupted (130).
	commandStarted bool
	// cmdOut is run's command's stdout with -o json when run copies it
	// (not a terminal), to tell whether its output ended a line.
	cmdOut *commandOutput
	// interrupt cancels the command's context with a cause, as main does
	// on SIGINT and SIGTERM (run's interruptOn).
	interrupt context.CancelCauseFunc
}

// Execute runs leasectl with args (the command line without the program
// name) and returns the process exit code. stdin, stdout and stderr are the
// command's streams; getenv reads the environment (os.Getenv in main).
// Cancelling ctx (main does on SIGINT and SIGTERM) stops a running
// command: audit --follow, watch, bench and serve end cleanly with exit 0; any other
// command that had not finished exits [ExitInterrupted], with status
// interrupted. A change (acquire, renew, release, revoke) interrupted
// inside the store prints its result instead (status timeout: the effect
// is unknown, retry with the same request id to learn it); a read (get,
// list, describe) has no effect to learn and says interrupted.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	red := newRedactor(append(dsnArgs(args), getenv(EnvDSN))...).with(getenv(EnvAPIToken))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a := &app{
		stdin:        stdin,
		stdout:       &redactingWriter{w: &pipeWatch{w: stdout, cancel: cancel}, r: red, urlsOnly: true},
		stderr:       &redactingWriter{w: stderr, r: red},
		rawStdout:    stdout,
		rawStderr:    stderr,
		getenv:       getenv,
		red:          red,
		timeout:      5 * time.Second,
		logLevel:     "info",
		defaultOwner: defaultOwner(getenv),
		interrupt:    cancel,
	}
	a.log = a.newLogger(slog.LevelInfo, stderr)
	root := a.rootCommand()
	// Until cobra parses -o, use what the command line asks for, so that a
	// flag error is reported as JSON when JSON was requested.
	a.output = outputArg(root, args)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return a.finish(ctx, cmd, err)
}

// finish prints err (when not already printed) and returns the exit code.
// cmd is the command that ran or was refused, for the usage hint. A command
// that failed after ctx was cancelled was interrupted: whatever it printed,
// it exits [ExitInterrupted] (but run once its command started: the
// interrupt went on to CMD). A write to stdout that failed comes first,
// whatever the command's outcome, also run's exit code (CMD's code, or
// ExitLost): the result run prints after CMD did not arrive.
func (a *app) finish(ctx context.Context, cmd *cobra.Command, err error) int {
	if errors.Is(context.Cause(ctx), errStdoutClosed) {
		// Nobody reads on: say nothing, and exit as a process that SIGPIPE
		// ended, also when the command then ended without an error (audit
		// --follow and watch stop so, export at its last page).
		return ExitStdoutClosed
	}
	var sf stdoutFailed
	if errors.As(context.Cause(ctx), &sf) {
		// The answer did not all reach stdout (a full disk, a closed
		// descriptor): a failure whatever the command's outcome, said on
		// stderr, since stdout takes nothing.
		fmt.Fprintf(a.stderr, "leasectl: %s: the output is incomplete\n", a.red.redact(sf.Error()))
		return ExitError
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code) // run: the command's own exit code, or ExitLost
	}
	if err == nil {
		return ExitOK
	}
	interrupted := ctx.Err() != nil && a.ran && !a.commandStarted
	var rep reported
	if errors.As(err, &rep) {
		if interrupted {
			return ExitInterrupted
		}
		return ExitCode(rep.status)
	}
	status := StatusError
	var f *failure
	switch {
	case interrupted:
		status = StatusInterrupted
		err = fmt.Errorf("interrupted (%v) before %s finished", context.Cause(ctx), cmd.CommandPath())
	case errors.As(err, &f):
		status = f.status
	case !a.ran:
		// cobra refused the command line: unknown command or flag, bad
		// flag value, wrong number of arguments, missing required flag.
		status = string(protocol.StatusInvalid)
	}
	msg := a.red.redact(err.Error())
	if a.output == "json" {
		command := ""
		if cmd != nil {
			command = cmd.Name()
		}
		a.printJSON(failureJSON(command, status, msg, givenRequestID(cmd)))
	} else {
		fmt.Fprintf(a.stderr, "leasectl: %s\n", msg)
		if status == string(protocol.StatusInvalid) && !a.ran {
			path := "leasectl"
			if cmd != nil {
				path = cmd.CommandPath()
			}
			fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", path)
		}
	}
	return ExitCode(status)
}

// debugTimeFormat stamps log lines at --log-level debug to the
// microsecond, so that steps such as run's release and the next run's
// acquire can be timed from the logs.
const debugTimeFormat = "15:04:05.000000"

// newLogger returns a tint logger on w at level. Colour is used only when w
// is a terminal and NO_COLOR is unset (https://no-color.org).
func (a *app) newLogger(level slog.Level, w io.Writer) *slog.Logger {
	color := false
	if f, ok := w.(*os.File); ok {
		color = isatty.IsTerminal(f.Fd()) && a.getenv("NO_COLOR") == "" && a.getenv("TERM") != "dumb"
	}
	timeFormat := "15:04:05.000"
	if level <= slog.LevelDebug {
		timeFormat = debugTimeFormat
	}
	return slog.New(tint.NewTextHandler(&redactingWriter{w: w, r: a.red}, &tint.Options{
		Level:      level,
		TimeFormat: timeFormat,
		NoColor:    !color,
	}))
}

// defaultOwner returns user@host for --owner and --actor.
func defaultOwner(getenv func(string) string) string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = getenv("USER")
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// parseLevel maps --log-level to a slog level.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", s)
}

// rootCommand builds the command tree.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "leasectl",
		Short: "Inspect and operate leasestore leases",
		Long: `leasectl is the operator CLI for leasestore: fenced, audited leases stored in
SQLite, PostgreSQL or etcd, directly or through a served store.

The store is chosen by --dsn, else $LEASESTORE_DSN, else sqlite:leasestore.db
in the working directory:
  sqlite:PATH                                 SQLite file, created and migrated on first use
  postgres://USER:PASSWORD@HOST:PORT/DB?...   PostgreSQL (pgx connection string; postgresql://
  or host=HOST user=USER dbname=DB ...        and libpq's key=value form too); never migrated
                                              implicitly: run 'leasectl migrate up'
  etcd://HOST:PORT[,HOST:PORT...]/PREFIX      etcd cluster (etcds:// for TLS; USER:PASSWORD@
                                              and ?cacert=&cert=&key=&dial-timeout= as etcdctl's)
  http://HOST:PORT or https://HOST:PORT       a store served by 'leasectl serve'; the bearer token
                                              comes from $LEASESTORE_API_TOKEN; a certificate of a
                                              private CA: https://HOST:PORT?cacert=CA.pem

Exit codes: 0 success; 2 invalid input or usage; 3 conflict;
4 not_found, stale_token, not_owner, expired; 5 timeout, unavailable, closed;
6 (run) the lease was lost while the command ran; 7 unauthorized or
forbidden (a served store refused $LEASESTORE_API_TOKEN: HTTP 401/403; a
database or etcd cluster refused the DSN's credentials or their grants);
130 interrupted (Ctrl-C); 141 stdout closed (leasectl demo | head);
1 anything else (a failed write to stdout too: a full disk).`,
		Example: `  leasectl acquire scan/10.0.0.0-24 --owner worker-1 --ttl 30s
  leasectl list -o json
  LEASESTORE_DSN=postgres://leasestore@db/leases leasectl revoke scan/10.0.0.0-24 --reason "stuck worker"`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Usage: "leasectl" (the help) and "leasectl [command]", not
		// "leasectl [flags]", which is refused.
		DisableFlagsInUseLine: true,
		// leasectl alone prints the help. Global flags without a command
		// are a usage error: a script's `leasectl -o json` read the help
		// on stdout with exit 0 as an answer.
		RunE: func(cmd *cobra.Command, _ []string) error {
			var given []string
			cmd.Flags().Visit(func(f *pflag.Flag) { given = append(given, "--"+f.Name) })
			if len(given) == 0 {
				return cmd.Help()
			}
			flags := "flag " + given[0]
			if len(given) > 1 {
				flags = "flags " + strings.Join(given, ", ")
			}
			return usageError("no command given, only the global %s: name a command after the flags, such as "+
				"list or health; 'leasectl --help' lists the commands", flags)
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Name() == cobra.ShellCompRequestCmd || cmd.Name() == cobra.ShellCompNoDescRequestCmd {
				return nil // the shell asks for completions: its command line is not checked
			}
			if !cmd.HasParent() {
				return nil // no command: its RunE says so, whatever the flags hold
			}
			switch a.output {
			case "table", "json":
			case "token":
				if !printsToken(cmd) {
					return usageError("--output token: only acquire, renew and get print a token; use -o json with %s", cmd.CommandPath())
				}
			default:
				return usageError("--output: %q is not one of table, json, token", a.output)
			}
			level, err := parseLevel(a.logLevel)
			if err != nil {
				return &failure{status: string(protocol.StatusInvalid), err: err}
			}
			a.log = a.newLogger(level, unwrapWriter(a.stderr))
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &failure{status: string(protocol.StatusInvalid), err: err}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.dsnFlag, "dsn", "", "store: sqlite:PATH, postgres://..., etcd://HOST:PORT/PREFIX or http://HOST:PORT (default $"+EnvDSN+", else "+DefaultDSN+")")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table, json, or token (acquire, renew, get: only the token)")
	pf.Var(newDurationFlag(&a.timeout, 5*time.Second, positive, 0), "timeout", "deadline of each operation")
	pf.StringVar(&a.logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(
		[]string{"table", "json", "token"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions(
		[]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))

	root.AddCommand(
		a.acquireCommand(), a.renewCommand(), a.releaseCommand(), a.getCommand(), a.describeCommand(), a.listCommand(), a.namespacesCommand(),
		a.revokeCommand(), a.auditCommand(), a.gcCommand(), a.healthCommand(), a.migrateCommand(), a.demoCommand(),
		a.benchCommand(), a.serveCommand(), a.versionCommand(), a.runCommand(), a.watchCommand(), a.fencingCommand(),
	)
	// The writers are set before cobra's help and completion commands are
	// made: the completion commands capture the output writer when made.
	// Help, usage and completion scripts are leasectl's own text, not the
	// store's: they skip the password redactor (which masked the DSN forms'
	// USER:PASSWORD placeholder and misaligned the help's columns).
	root.SetIn(a.stdin)
	root.SetOut(unwrapWriter(a.stdout))
	root.SetErr(a.stderr)
	for _, c := range root.Commands() {
		registerNamespaceCompletion(c, a.completeNamespaces)
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "get", "describe", "renew", "release", "revoke":
			c.ValidArgsFunction = a.completeKeys
		case "help":
			c.Example = "  leasectl help acquire"
			// cobra answers an unknown topic with "Unknown help topic" and
			// the root's usage on stdout, and exit 0.
			c.RunE = func(_ *cobra.Command, args []string) error {
				return helpTopic(root, args)
			}
		case "completion":
			c.Example = "  source <(leasectl completion bash)\n  leasectl completion zsh > \"${fpath[1]}/_leasectl\""
			// Without a RunE, cobra answers an unknown shell with help and exit 0.
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(_ *cobra.Command, args []string) error {
				if len(args) == 0 {
					return usageError("completion: expected a shell: bash, zsh, fish or powershell")
				}
				return usageError("completion: leasectl cannot complete for %q: want bash, zsh, fish or powershell", args[0])
			}
			examples := map[string]string{
				"bash":       "  source <(leasectl completion bash)",
				"zsh":        "  leasectl completion zsh > \"${fpath[1]}/_leasectl\"",
				"fish":       "  leasectl completion fish | source",
				"powershell": "  leasectl completion powershell | Out-String | Invoke-Expression",
			}
			for _, sub := range c.Commands() {
				sub.Example = examples[sub.Name()]
			}
		}
	}
	markRun(root, &a.ran)
	return root
}

// helpTopic prints the help of the command that args name (the root's
// when none) on stdout. A topic that names no command is a usage error
// (exit 2, on stderr), as `leasectl TOPIC` is: a word left over after the
// command path (`help bogus`, `help migrate bogus`) names none.
func helpTopic(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if cmd == nil {
		cmd = root
	}
	if err != nil || len(rest) > 0 {
		known := "leasectl help" + strings.TrimPrefix(cmd.CommandPath(), root.Name())
		switch {
		case cmd == root:
			known = "'" + known + "' lists the commands"
		case cmd.HasAvailableSubCommands():
			known = "'" + known + "' lists its subcommands"
		default:
			known = "'" + known + "' is the help of " + cmd.CommandPath()
		}
		msg := fmt.Sprintf("help: no help topic %q: %s", strings.Join(args, " "), known)
		if len(rest) > 0 {
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on the root
			}
			if suggestions := cmd.SuggestionsFor(rest[0]); len(suggestions) > 0 {
				msg += "; did you mean " + strings.Join(suggestions, " or ") + "?"
			}
		}
		return usageError("%s", msg)
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	return cmd.Help()
}

// markRun wraps the RunE of c and its subcommands so that *ran is set when
// a command's own code starts: errors before that point come from cobra
// (unknown command or flag, bad flag value, wrong arguments, missing
// required flag) and are usage errors.
func markRun(c *cobra.Command, ran *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*ran = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRun(sub, ran)
	}
}

// printsToken reports whether cmd takes -o token: the commands whose
// success carries the caller's lease.
func printsToken(cmd *cobra.Command) bool {
	if cmd.Parent() == nil || cmd.Parent().Parent() != nil {
		return false
	}
	switch cmd.Name() {
	case "acquire", "renew", "get":
		return true
	}
	return false
}

// givenRequestID returns the --request-id cmd was given, "" when none
// (or cmd is nil): what a failure's JSON carries.
func givenRequestID(cmd *cobra.Command) string {
	if cmd == nil {
		return ""
	}
	if f := cmd.Flags().Lookup("request-id"); f != nil && f.Changed {
		return f.Value.String()
	}
	return ""
}

// outputArg returns the output format given in args ("table" when none),
// found before cobra parses them, so that a usage error is reported in the
// requested format even when flag parsing stops before -o. It reads args
// as pflag does for the command they name in root: -o inside a cluster of
// short flags (-Ao json, -Aojson, -fo=json) counts, and the value of
// another flag (--reason -o) does not; an unknown flag is passed over,
// since -o after it is what the error is to be printed in (in its own
// cluster too, taken as a flag that needs no value).
func outputArg(root *cobra.Command, args []string) string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		cmd = root
	}
	lookup := func(name string, short bool) *pflag.Flag {
		for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags()} {
			if short {
				if f := fs.ShorthandLookup(name); f != nil {
					return f
				}
			} else if f := fs.Lookup(name); f != nil {
				return f
			}
		}
		return nil
	}
	out := "table"
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			return out
		case strings.HasPrefix(arg, "--"):
			name, value, hasValue := strings.Cut(arg[2:], "=")
			f := lookup(name, false)
			switch {
			case f == nil:
			case hasValue && f.Name == "output":
				out = value
			case hasValue || f.NoOptDefVal != "" || i+1 == len(args):
			case f.Name == "output":
				out = args[i+1]
				i++
			default:
				i++ // the flag's value
			}
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			// A cluster of short flags: each takes the rest of the
			// cluster (after an optional "="), or the next argument, as
			// its value unless it needs none.
			for rest := arg[1:]; rest != ""; rest = rest[1:] {
				if rest[0] >= utf8.RuneSelf {
					break // pflag reads one byte: no flag has it
				}
				f := lookup(rest[:1], true)
				if f == nil {
					// Unknown: passed over as an unknown long flag is
					// (list -zo json), unless "=" gives it the rest.
					if len(rest) > 1 && rest[1] == '=' {
						break
					}
					continue
				}
				var value string
				switch {
				case len(rest) > 2 && rest[1] == '=':
					value = rest[2:]
				case f.NoOptDefVal != "":
					continue
				case len(rest) > 1:
					value = rest[1:]
				case i+1 < len(args):
					i++
					value = args[i]
				}
				if f.Name == "output" {
					out = value
				}
				break
			}
		}
	}
	return out
}

// unwrapWriter returns the writer under a redactingWriter, so a logger can
// look at the real stream for terminal detection (it re-wraps it).
func unwrapWriter(w io.Writer) io.Writer {
	if rw, ok := w.(*redactingWriter); ok {
		return rw.w
	}
	return w
}

// opContext returns a context bounded by --timeout for one operation.
func (a *app) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// exactArgs is cobra.ExactArgs with a message naming the argument.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("expected %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}

// registerNamespaceCompletion gives every --namespace flag of c and its
// subcommands the store-backed completion.
func registerNamespaceCompletion(c *cobra.Command, fn cobra.CompletionFunc) {
	if c.Flags().Lookup("namespace") != nil {
		_ = c.RegisterFlagCompletionFunc("namespace", fn)
	}
	for _, sub := range c.Commands() {
		registerNamespaceCompletion(sub, fn)
	}
}
