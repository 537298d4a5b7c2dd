package httpapi

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names of the HTTP layer. The store's own operation metrics come
// from promobserver, registered on the same registry.
const (
	RequestsTotalName   = "leasestore_http_requests_total"
	RequestDurationName = "leasestore_http_request_duration_seconds"
	InFlightName        = "leasestore_http_requests_in_flight"
)

// httpMetrics counts and times requests by route (a closed set), method
// and code.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RequestsTotalName,
			Help: "HTTP requests answered, by route, method and HTTP code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    RequestDurationName,
			Help:    "Time from a request's arrival to its answer, by route, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: InFlightName,
			Help: "HTTP requests being answered.",
		}),
	}
	cs := []prometheus.Collector{m.requests, m.duration, m.inFlight}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("httpapi: register metrics: %w", err)
		}
	}
	return m, nil
}

// observe records one answered request. method is folded to a closed set.
func (m *httpMetrics) observe(route, method string, code int, d time.Duration) {
	switch method {
	case "GET", "HEAD", "POST":
	default:
		method = "other"
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}
