package audit

import (
	"context"
	"log/slog"

	"github.com/leasestore/leasestore/protocol"
)

// LogHookMessage is the message of every record a [LogHook] writes, so log
// pipelines can select them.
const LogHookMessage = "lease state change"

// LogHookConfig tunes a [LogHook]. A nil *LogHookConfig means all defaults.
type LogHookConfig struct {
	// Level of the records. Default: slog.LevelInfo.
	Level slog.Leveler
}

// LogHook is a [protocol.AuditHook] that copies every state change to a
// structured log: one record per change, with message [LogHookMessage] and
// the attributes
//
//	op, status, namespace, key, owner, token, request_id, actor, reason
//
// and expires_at (a time), always present (reason is "" except for
// revoke); like the audit trail's expires_at, for release and revoke it is
// when the lease would have expired.
//
// The log is a copy for operators and pipelines: the durable trail is the
// one each backend writes in the same atomic step as the change. Pass the
// hook in [protocol.Config].AuditHook. A LogHook is safe for concurrent use
// as far as its logger's handler is (slog's handlers are).
type LogHook struct {
	logger *slog.Logger
	level  slog.Leveler
}

var _ protocol.AuditHook = (*LogHook)(nil)

// NewLogHook returns a hook writing to logger (nil means [slog.Default]).
// cfg may be nil. The hook does not own the logger.
func NewLogHook(logger *slog.Logger, cfg *LogHookConfig) *LogHook {
	if logger == nil {
		logger = slog.Default()
	}
	h := &LogHook{logger: logger, level: slog.LevelInfo}
	if cfg != nil && cfg.Level != nil {
		h.level = cfg.Level
	}
	return h
}

// RecordStateChange implements [protocol.AuditHook]: it writes one record
// for ch, passing ctx to the logger's handler (for trace ids and the like).
func (h *LogHook) RecordStateChange(ctx context.Context, ch protocol.StateChange) {
	level := h.level.Level()
	if !h.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("op", string(ch.Op)),
		slog.String("status", string(ch.Status)),
		slog.String("namespace", ch.Lease.Key.Namespace),
		slog.String("key", ch.Lease.Key.Name),
		slog.String("owner", ch.Lease.Owner),
		slog.Int64("token", ch.Lease.Token),
		slog.String("request_id", ch.RequestID),
		slog.String("actor", ch.Actor),
		slog.String("reason", ch.Reason),
		slog.Time("expires_at", ch.Lease.ExpiresAt),
	}
	h.logger.LogAttrs(ctx, level, LogHookMessage, attrs...)
}
