package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/acktor/acktor/actors"
	"github.com/acktor/acktor/messages"
)

// Metrics is a node's Prometheus registry: the Go runtime's and process's
// series, Proto.Actor's OpenTelemetry instruments bridged in through
// MeterProvider, and the gateway's tracker and window series.
type Metrics struct {
	Registry *prometheus.Registry
	// MeterProvider feeds Registry. Proto.Actor records into the global
	// otel meter: the node sets this as the global provider and passes it
	// to the actor system (actor.WithMetricProviders).
	MeterProvider *sdkmetric.MeterProvider
}

// NewMetrics makes an empty registry with the Go and process collectors
// and an OpenTelemetry bridge into it.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	return &Metrics{Registry: reg, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp),
		sdkmetric.WithView(countsWithoutUnit))}, nil
}

// countsWithoutUnit clears the unit "1" of Proto.Actor's counts: the
// exporter would name them by it (protoactor_actor_spawn_count_ratio_total),
// where Prometheus names a count by what it counts alone.
func countsWithoutUnit(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if i.Unit != "1" {
		return sdkmetric.Stream{}, false
	}
	return sdkmetric.Stream{Name: i.Name, Description: i.Description}, true
}

// Close stops the meter provider.
func (m *Metrics) Close(ctx context.Context) error {
	return m.MeterProvider.Shutdown(ctx)
}

// scrapeTimeout bounds one scrape's questions to ackers and counters.
const scrapeTimeout = 5 * time.Second

// collector reads the tracker and the windows at scrape time: the values
// live in the actors, so there is nothing to keep in step between scrapes.
type collector struct {
	s *Server

	roots, completed, failed, timedOut, replayed, deadLettered, tuples, inFlight, latency *prometheus.Desc

	ackers, ackerSetVersion                                                *prometheus.Desc
	ackerInFlight, ackerCompleted, ackerFailed, ackerExpired, ackerBytes   *prometheus.Desc
	ackerHandedOver, ackerAdopted, ackerForwarded, ackerRefused            *prometheus.Desc
	windowApplied, windowDuplicates, windowLate, windowRefused, windowKeys *prometheus.Desc
	windowEnd, subscribers, droppedSubscribers, scrapeErrors, members      *prometheus.Desc
	stageServers, stageArrivals, stageHandled, stageBusy, stageUtilisation *prometheus.Desc
	stageInStage, stageQueued, stageModelInStage, stageWarning             *prometheus.Desc
}

func newCollector(s *Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("acktor_"+name, help, labels, nil)
	}
	return &collector{s: s,
		roots:           d("roots_total", "Roots the spouts read."),
		completed:       d("completed_total", "Roots whose tree completed."),
		failed:          d("failed_total", "Root attempts that failed or timed out."),
		timedOut:        d("timed_out_total", "Root attempts that timed out."),
		replayed:        d("replayed_total", "Roots replayed after a failure."),
		deadLettered:    d("dead_lettered_total", "Roots given up and sent to the dead-letter sink."),
		tuples:          d("tuples_total", "Tuples emitted, roots included."),
		inFlight:        d("in_flight", "Roots in flight."),
		latency:         d("complete_latency_seconds", "A root's emission to its completion, over the run (buckets at every power of two of microseconds)."),
		ackers:          d("ackers", "Ackers in the current acker set."),
		ackerSetVersion: d("acker_set_version", "Version of the acker set; each change adds one."),
		ackerInFlight:   d("acker_in_flight", "Records an acker holds.", "acker"),
		ackerCompleted:  d("acker_completed_total", "Records an acker completed.", "acker"),
		ackerFailed:     d("acker_failed_total", "Records an acker failed.", "acker"),
		ackerExpired:    d("acker_expired_total", "Records that timed out at an acker.", "acker"),
		ackerBytes:      d("acker_bytes", "Heap bytes of an acker's ledger.", "acker"),
		ackerHandedOver: d("acker_handed_over_total", "Records an acker handed to a new owner.", "acker"),
		ackerAdopted:    d("acker_adopted_total", "Records an acker took over.", "acker"),
		ackerForwarded:  d("acker_forwarded_total", "Entries an acker passed on to a root's new acker.", "acker"),
		ackerRefused: d("acker_refused_total", "What an acker refused, by reason: malformed messages (bad_message), inits and handed-over records (rejected), "+
			"acks for unknown roots with the ledger full (dropped), remote clients' Tracks (client).", "acker", "reason"),
		windowApplied:      d("window_applied_total", "Updates a counter component applied.", "component"),
		windowDuplicates:   d("window_duplicates_total", "Replayed updates a counter component recognised and skipped.", "component"),
		windowLate:         d("window_late_total", "Updates older than the window.", "component"),
		windowRefused:      d("window_refused_total", "Updates refused (limits, bad values).", "component"),
		windowKeys:         d("window_keys", "Keys with a nonzero count in the window.", "component"),
		windowEnd:          d("window_end_timestamp_seconds", "End of the window, unix seconds.", "component"),
		subscribers:        d("gateway_subscribers", "WebSocket and SSE streams open."),
		droppedSubscribers: d("gateway_dropped_subscribers_total", "Streams dropped as slow consumers."),
		scrapeErrors:       d("scrape_errors", "Questions this scrape could not get answered (a member down).", "what"),
		members:            d("members", "Cluster members this node sees."),
		stageServers:       d("stage_servers", "Task actors of a stage on this member.", "stage"),
		stageArrivals:      d("stage_arrivals_total", "Messages posted to a stage's mailboxes: λ is their rate (none for the source, whose arrivals are a broker's backlog).", "stage"),
		stageHandled:       d("stage_handled_total", "Messages a stage handled (the source: roots taken).", "stage"),
		stageBusy:          d("stage_busy_seconds_total", "Seconds a stage's tasks spent handling messages: μ is the rate of handled over the rate of this.", "stage"),
		stageUtilisation:   d("stage_utilisation", "λ/(cμ) of a stage; at 1 its mailboxes grow without bound.", "stage"),
		stageInStage:       d("stage_in_stage", "Mean messages in a stage (queued or handled), measured.", "stage"),
		stageQueued:        d("stage_queued", "Mean messages waiting in a stage's mailboxes, measured.", "stage"),
		stageModelInStage:  d("stage_model_in_stage", "Mean messages in a stage by the model (mmc: M/M/c; split: c M/M/1 queues); -1 when unstable.", "stage", "model"),
		stageWarning:       d("stage_warning", "1 while a stage has stayed over the utilisation threshold.", "stage"),
	}
}

// Describe sends nothing: the collector is unchecked, since its acker and
// component labels change at run time.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.members, float64(len(s.c.MemberList.Members().Members())))
	version, n := s.rt.AckerSet()
	gauge(c.ackers, float64(n))
	gauge(c.ackerSetVersion, float64(version))
	if p, ok := s.rt.Progress(); ok {
		counter(c.roots, p.Roots)
		counter(c.completed, p.Completed)
		counter(c.failed, p.Failed)
		counter(c.timedOut, p.TimedOut)
		counter(c.replayed, p.Replayed)
		counter(c.deadLettered, p.DeadLettered)
		counter(c.tuples, p.Tuples)
		gauge(c.inFlight, float64(p.InFlight))
		buckets := make(map[float64]uint64, len(p.Latency))
		for _, b := range p.Latency {
			buckets[b.Upper.Seconds()] = b.Cumulative
		}
		ch <- prometheus.MustNewConstHistogram(c.latency, p.LatencyCount, p.LatencySum.Seconds(), buckets)
	}
	ackers, err := s.rt.Ackers(s.c)
	gauge(c.scrapeErrors, b2f(err != nil), "ackers")
	for _, a := range ackers {
		gauge(c.ackerInFlight, float64(a.InFlight), a.ID)
		counter(c.ackerCompleted, a.Completed, a.ID)
		counter(c.ackerFailed, a.Failed, a.ID)
		counter(c.ackerExpired, a.Expired, a.ID)
		gauge(c.ackerBytes, float64(a.Bytes), a.ID)
		counter(c.ackerHandedOver, a.HandedOver, a.ID)
		counter(c.ackerAdopted, a.Adopted, a.ID)
		counter(c.ackerForwarded, a.Forwarded, a.ID)
		counter(c.ackerRefused, a.BadMessages, a.ID, "bad_message")
		counter(c.ackerRefused, a.Rejected, a.ID, "rejected")
		counter(c.ackerRefused, a.Dropped, a.ID, "dropped")
		counter(c.ackerRefused, a.ClientsRefused, a.ID, "client")
	}
	failed := 0
	names := s.rt.Topology().Counters()
	results := c.queryCounters(names)
	for i, name := range names {
		r := results[i]
		if r == nil {
			failed++
			continue
		}
		counter(c.windowApplied, r.Applied, name)
		counter(c.windowDuplicates, r.Duplicates, name)
		counter(c.windowLate, r.Late, name)
		counter(c.windowRefused, r.Refused, name)
		gauge(c.windowKeys, float64(r.LiveKeys), name)
		if r.HasWindow && time.Duration(r.End-r.Start) != actors.AllTime {
			gauge(c.windowEnd, float64(r.End)/1e9, name)
		}
	}
	gauge(c.scrapeErrors, float64(failed), "counters")
	for _, st := range s.rt.Stages() {
		gauge(c.stageServers, float64(st.Servers), st.Name)
		if st.Name != actors.SourceStage {
			counter(c.stageArrivals, st.Posted, st.Name)
		}
		counter(c.stageHandled, st.Handled, st.Name)
		ch <- prometheus.MustNewConstMetric(c.stageBusy, prometheus.CounterValue, st.BusySeconds, st.Name)
		gauge(c.stageUtilisation, st.Model.Rho, st.Name)
		gauge(c.stageInStage, st.L, st.Name)
		gauge(c.stageQueued, st.Lq, st.Name)
		gauge(c.stageModelInStage, st.Model.L, st.Name, "mmc")
		gauge(c.stageModelInStage, st.Split.L, st.Name, "split")
		gauge(c.stageWarning, b2f(st.Warning != ""), st.Name)
	}
	_, subs := s.hub.stats()
	gauge(c.subscribers, float64(subs))
	counter(c.droppedSubscribers, s.hub.droppedTotal())
}

// queryCounters asks every counter component at once, under one deadline,
// so that a scrape waits for the slowest, not for their sum; nil stands for
// a component that did not answer.
func (c *collector) queryCounters(names []string) []*actors.CounterResult {
	out := make([]*actors.CounterResult, len(names))
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			if r, err := c.s.rt.Query(ctx, c.s.c, name, &messages.CounterQuery{}); err == nil {
				out[i] = r
			}
		})
	}
	wg.Wait()
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricsHandler serves the metrics registry with this gateway's collector
// registered in it.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	if s.metrics != nil {
		reg = s.metrics.Registry
	} else {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if err := reg.Register(newCollector(s)); err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("metrics: %v", err))
		})
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Timeout: 2 * scrapeTimeout})
}
