// Package metrics holds appkb's Prometheus instruments and serves them at
// GET /metrics. Other packages report through the small functions below (one
// call at the place where something happens), so they need not know the
// client library. Process-wide instruments live in one registry; what belongs
// to one server (its database pool, its queue) is added per handler.
package metrics

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const namespace = "appkb"

var (
	registry = prometheus.NewRegistry()

	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "http_requests_total",
		Help: "HTTP requests answered, by route template, method and status.",
	}, []string{"route", "method", "status"})
	httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "http_request_duration_seconds",
		Help:    "Time from request to the end of the response (whole stream for event streams).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"route", "method"})
	httpInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "http_requests_in_flight",
		Help: "Requests being served now.",
	})
	activeStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "http_active_streams",
		Help: "Server-Sent Event streams open now.",
	})
	rateLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "http_rate_limited_total",
		Help: "Requests refused with 429 by the per-key rate limit.",
	})

	modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "model_calls_total",
		Help: "Calls to model providers, by provider, kind of model and outcome (ok or error).",
	}, []string{"provider", "kind", "outcome"})
	modelDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "model_call_duration_seconds",
		Help:    "Duration of model calls, streams until their last chunk.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"provider", "kind"})
	modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "model_tokens_total",
		Help: "Tokens reported by model calls, by provider and direction (prompt or completion).",
	}, []string{"provider", "direction"})

	indexedDocs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "indexing_documents_total",
		Help: "Documents the indexing workers finished, by outcome (completed or error).",
	}, []string{"outcome"})
	indexedChunks = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "indexing_chunks_total",
		Help: "Chunks written by the indexing workers.",
	})

	workflowRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "workflow_runs_total",
		Help: "Workflow runs that ended or paused, by status.",
	}, []string{"status"})
	nodeRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "workflow_node_executions_total",
		Help: "Workflow node executions that ended, by node type and status.",
	}, []string{"node_type", "status"})

	buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "Always 1; the labels tell the running version.",
	}, []string{"version", "commit"})
)

func init() {
	registry.MustRegister(httpRequests, httpDuration, httpInFlight, activeStreams, rateLimited,
		modelCalls, modelDuration, modelTokens, indexedDocs, indexedChunks, workflowRuns, nodeRuns, buildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// SetBuild records the running version.
func SetBuild(version, commit string) { buildInfo.WithLabelValues(version, commit).Set(1) }

// RequestStarted counts a request in flight; call the returned function when
// it is answered.
func RequestStarted() (done func()) {
	httpInFlight.Inc()
	return httpInFlight.Dec
}

// Request records an answered request. route is the template the router
// matched ("/v1/datasets/:dataset_id"), never the raw path.
//
// Every label comes from a fixed set, whatever the client sends: a method
// outside the standard ones counts as "other" (each made-up method would
// otherwise be a series of its own), and so does a status outside 100-599.
func Request(route, method string, status int, elapsed time.Duration) {
	method = MethodLabel(method)
	code := "other"
	if status >= 100 && status <= 599 {
		code = strconv.Itoa(status)
	}
	httpRequests.WithLabelValues(route, method, code).Inc()
	httpDuration.WithLabelValues(route, method).Observe(elapsed.Seconds())
}

// StreamOpened counts an open event stream; call the returned function when
// it closes.
func StreamOpened() (closed func()) {
	activeStreams.Inc()
	return activeStreams.Dec
}

// RateLimited counts a request refused by the rate limit.
func RateLimited() { rateLimited.Inc() }

// ModelCall records one call to a model provider. kind is chat, embedding,
// rerank, moderation, speech_to_text or text_to_speech.
func ModelCall(provider, kind string, err error, elapsed time.Duration, promptTokens, completionTokens int) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	modelCalls.WithLabelValues(provider, kind, outcome).Inc()
	modelDuration.WithLabelValues(provider, kind).Observe(elapsed.Seconds())
	if promptTokens > 0 {
		modelTokens.WithLabelValues(provider, "prompt").Add(float64(promptTokens))
	}
	if completionTokens > 0 {
		modelTokens.WithLabelValues(provider, "completion").Add(float64(completionTokens))
	}
}

// DocumentIndexed records a document the indexing workers finished.
func DocumentIndexed(ok bool) {
	if !ok {
		indexedDocs.WithLabelValues("error").Inc()
		return
	}
	indexedDocs.WithLabelValues("completed").Inc()
}

// ChunksIndexed counts chunks the indexing workers wrote.
func ChunksIndexed(n int) { indexedChunks.Add(float64(n)) }

// WorkflowRun records a run that reached status (succeeded, failed,
// stopped, partial-succeeded, paused…).
func WorkflowRun(status string) { workflowRuns.WithLabelValues(status).Inc() }

// NodeExecution records a node execution that reached status.
func NodeExecution(nodeType, status string) { nodeRuns.WithLabelValues(nodeType, status).Inc() }

// Source is what one server adds to the process-wide instruments.
type Source struct {
	// DB is the server's connection pool (its statistics are exported).
	DB *sql.DB
	// QueueDepth counts queued indexing jobs; it is called at each scrape.
	QueueDepth func(ctx context.Context) (int64, error)
	// Token, when set, is the bearer token scrapers must send.
	Token string
}

// Handler serves the Prometheus text format for the process-wide instruments
// plus those of src.
func Handler(src Source) http.Handler {
	local := prometheus.NewRegistry()
	if src.DB != nil {
		local.MustRegister(collectors.NewDBStatsCollector(src.DB, namespace))
	}
	if src.QueueDepth != nil {
		local.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "indexing_queue_depth",
			Help: "Indexing jobs waiting or running (-1 when the database cannot be read).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := src.QueueDepth(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
	h := promhttp.HandlerFor(prometheus.Gatherers{registry, local}, promhttp.HandlerOpts{})
	if src.Token == "" {
		return h
	}
	want := []byte("Bearer " + src.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "metrics need the bearer token given with --metrics-token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// MethodLabel is the method label of a request: its method when standard,
// "other" for anything else.
func MethodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}
