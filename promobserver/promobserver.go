// Package promobserver exports leasestore's operation metrics to Prometheus:
// an [Observer] is a [protocol.Observer] to pass in [protocol.Config], and a
// [scheduler.Observer] to pass in scheduler.Config, backed by
// github.com/prometheus/client_golang.
//
// It exposes these metrics:
//
//	leasestore_operations_total{op, status, backend, replayed}   counter
//	leasestore_operation_duration_seconds{op, backend}           histogram
//	leasestore_swept_rows_total{backend}                         counter
//	leasestore_scheduler_events_total{namespace, event}          counter
//	leasestore_scheduler_owned_targets{namespace, worker}        gauge
//	leasestore_scheduler_fair_share{namespace, worker}           gauge
//	leasestore_scheduler_workers{namespace, worker}              gauge
//	leasestore_scheduler_targets{namespace, worker}              gauge
//
// op is one of the eight operations, or an operation the runtime runs for
// its backend (sweep; audit, namespaces and prune, through
// [protocol.Runtime.Do], whose op its caller names), status one of the
// protocol's status strings ("ok" for a success that has no status: health,
// close and the operations run through Do), backend the backend's name
// ("postgres", "sqlite", "etcd", "http", "memory"), and replayed "true" when
// an idempotent retry was answered from the audit trail rather than
// executed. Label values come only from these closed sets, so the number of
// series stays small whatever the keys and owners are. The scheduler's
// metrics carry the targets' namespace, the event kind (acquired, busy,
// lost, handed_over, released, round, membership_lost) and, for the gauges, the worker's
// identity: one series per scheduler the process runs, never per target.
//
// Like protocol, this package must not import any database driver or any
// package under sqlstore/.
package promobserver

import (
	"context"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler"
)

// Metric names, for dashboards and alerts.
const (
	OperationsTotalName   = "leasestore_operations_total"
	OperationDurationName = "leasestore_operation_duration_seconds"
	SweptRowsTotalName    = "leasestore_swept_rows_total"

	SchedulerEventsTotalName  = "leasestore_scheduler_events_total"
	SchedulerOwnedTargetsName = "leasestore_scheduler_owned_targets"
	SchedulerFairShareName    = "leasestore_scheduler_fair_share"
	SchedulerWorkersName      = "leasestore_scheduler_workers"
	SchedulerTargetsName      = "leasestore_scheduler_targets"
)

// statusOK is the status label of a successful health or close, which the
// runtime reports with an empty status.
const statusOK = "ok"

// durationBuckets spans 0.5ms to about 8s in powers of two: an embedded
// SQLite operation takes well under a millisecond, a PostgreSQL round trip a
// few, and the runtime's default deadline is 5s.
var durationBuckets = prometheus.ExponentialBuckets(0.0005, 2, 15)

// Observer counts and times the operations of one or more [protocol.Runtime]s.
// Share one Observer between runtimes registered on the same registry: the
// backend label tells them apart. It is a [prometheus.Collector] registered
// by [New]. An Observer is safe for concurrent use.
type Observer struct {
	ops      *prometheus.CounterVec
	duration *prometheus.HistogramVec
	swept    *prometheus.CounterVec

	schedEvents  *prometheus.CounterVec
	schedOwned   *prometheus.GaugeVec
	schedShare   *prometheus.GaugeVec
	schedWorkers *prometheus.GaugeVec
	schedTargets *prometheus.GaugeVec
}

var (
	_ protocol.Observer    = (*Observer)(nil)
	_ scheduler.Observer   = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)

// New returns an Observer registered on reg (nil means
// [prometheus.DefaultRegisterer]). It returns an error, and registers
// nothing, if reg refuses the metrics, for example because another Observer
// is already registered there. To take it out again, pass the Observer to
// reg.Unregister.
func New(reg prometheus.Registerer) (*Observer, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	o := &Observer{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: OperationsTotalName,
			Help: "Lease store operations by operation, status, backend and whether the outcome was a replay of an earlier request.",
		}, []string{"op", "status", "backend", "replayed"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    OperationDurationName,
			Help:    "Duration of lease store operations from the call to its result, as seen by the runtime, in seconds.",
			Buckets: durationBuckets,
		}, []string{"op", "backend"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: SweptRowsTotalName,
			Help: "Rows of ended leases removed by background sweeps (op sweep), by backend.",
		}, []string{"backend"}),
		schedEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: SchedulerEventsTotalName,
			Help: "Scheduler events (acquired, busy, lost, handed_over, released, round, membership_lost) by the targets' namespace.",
		}, []string{"namespace", "event"}),
		schedOwned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: SchedulerOwnedTargetsName,
			Help: "Targets a scheduler holds and works on (not those it is giving up).",
		}, []string{"namespace", "worker"}),
		schedShare: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: SchedulerFairShareName,
			Help: "A scheduler's fair share at its last round: ceil(targets / live workers).",
		}, []string{"namespace", "worker"}),
		schedWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: SchedulerWorkersName,
			Help: "Live workers a scheduler knew of at its last round, itself while a member.",
		}, []string{"namespace", "worker"}),
		schedTargets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: SchedulerTargetsName,
			Help: "Targets in the set at a scheduler's last round.",
		}, []string{"namespace", "worker"}),
	}
	if err := reg.Register(o); err != nil {
		return nil, fmt.Errorf("promobserver: register metrics: %w", err)
	}
	return o, nil
}

// ObserveOperation implements [protocol.Observer]: it counts ev and records
// its duration.
func (o *Observer) ObserveOperation(_ context.Context, ev protocol.OperationEvent) {
	status := string(ev.Status)
	if status == "" {
		status = statusOK
	}
	o.ops.WithLabelValues(string(ev.Op), status, ev.Backend, strconv.FormatBool(ev.Replayed)).Inc()
	o.duration.WithLabelValues(string(ev.Op), ev.Backend).Observe(ev.Duration.Seconds())
	if ev.Op == protocol.OpSweep {
		o.swept.WithLabelValues(ev.Backend).Add(float64(ev.Items))
	}
}

// ObserveScheduler implements [scheduler.Observer]: it counts ev and sets
// the worker's gauges to the counts ev carries.
func (o *Observer) ObserveScheduler(_ context.Context, ev scheduler.Event) {
	o.schedEvents.WithLabelValues(ev.Namespace, string(ev.Kind)).Inc()
	o.schedOwned.WithLabelValues(ev.Namespace, ev.Worker).Set(float64(ev.Owned))
	o.schedShare.WithLabelValues(ev.Namespace, ev.Worker).Set(float64(ev.Share))
	o.schedWorkers.WithLabelValues(ev.Namespace, ev.Worker).Set(float64(ev.Workers))
	o.schedTargets.WithLabelValues(ev.Namespace, ev.Worker).Set(float64(ev.Targets))
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.ops, o.duration, o.swept, o.schedEvents, o.schedOwned, o.schedShare, o.schedWorkers, o.schedTargets}
}

// Describe implements [prometheus.Collector].
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements [prometheus.Collector].
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}
