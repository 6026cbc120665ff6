package cli

import (
	"flag"
	"net"
	"net/http"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"appkb/handlers"
	"appkb/handlers/admission"
	"appkb/handlers/ratelimit"
)

// limitFlags are the serve flags that protect the server from overload and
// from slow, idle or oversized requests.
type limitFlags struct {
	maxConns    *int
	maxInflight *int
	queueWait   *time.Duration
	headerTime  *time.Duration
	bodyTime    *time.Duration
	bodyRate    *int
	bodyMax     *time.Duration
	authFails   *float64
	writeTime   *time.Duration
	idleTime    *time.Duration
	maxText     *int
}

func addLimitFlags(fs *flag.FlagSet) *limitFlags {
	return &limitFlags{
		maxConns: fs.Int("max-conns", 0,
			"most client connections open at once; 0 means half the process's open-file limit (at most 10000)"),
		maxInflight: fs.Int("max-inflight", 256,
			"most requests worked on at once; more wait up to --queue-wait, then get 503 with Retry-After (0: no limit)"),
		queueWait:  fs.Duration("queue-wait", 5*time.Second, "how long a request over --max-inflight waits for a slot"),
		headerTime: fs.Duration("header-timeout", 10*time.Second, "time allowed to send the request headers"),
		bodyTime: fs.Duration("read-timeout", 20*time.Second,
			"time allowed to send a request body once admitted, extended by a second per --read-min-rate bytes received; slower uploads get 408"),
		bodyRate: fs.Int("read-min-rate", 500,
			"bytes a second a request body must arrive at to keep extending --read-timeout (0: the timeout is fixed)"),
		bodyMax: fs.Duration("read-max", 5*time.Minute,
			"most time a request body may take however fast it arrives (0: no bound beyond --read-timeout and --read-min-rate)"),
		authFails: fs.Float64("auth-fail-limit", 5,
			"requests a second with a missing or invalid API key allowed per client address (bursts of 4x); more get 429 (0: no limit)"),
		writeTime: fs.Duration("write-timeout", 2*time.Minute,
			"time allowed to take a response once it starts (event streams use a deadline per event instead)"),
		idleTime: fs.Duration("idle-timeout", 60*time.Second, "how long an idle keep-alive connection stays open"),
		maxText: fs.Int("max-text", 100_000,
			"most characters in query and in each input value; longer ones get 400 invalid_param (0: no limit)"),
	}
}

// handlerLimits are the limits the HTTP handlers enforce.
func (f *limitFlags) handlerLimits() handlers.Limits {
	return handlers.Limits{
		Admission:      admission.New(*f.maxInflight, *f.queueWait),
		BodyTimeout:    *f.bodyTime,
		BodyMinRate:    *f.bodyRate,
		BodyMaxTimeout: *f.bodyMax,
		WriteTimeout:   *f.writeTime,
		MaxText:        *f.maxText,
		UnknownKeys:    ratelimit.New(*f.authFails, int(max(1, 4**f.authFails))),
	}
}

// configure sets the server's header, idle and header-size limits. Body
// and write deadlines are set per request by the handlers (see
// handlers.Limits), not here, so that streams are not cut off by a deadline
// meant for uploads.
func (f *limitFlags) configure(s *http.Server) {
	s.ReadHeaderTimeout = *f.headerTime
	s.IdleTimeout = *f.idleTime
	s.MaxHeaderBytes = 64 << 10
}

// listen opens addr with at most --max-conns connections accepted at once;
// further clients wait in the kernel's backlog instead of using up file
// descriptors.
func (f *limitFlags) listen(addr string) (net.Listener, int, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	n := *f.maxConns
	if n <= 0 {
		n = defaultMaxConns()
	}
	return netutil.LimitListener(ln, n), n, nil
}

// defaultMaxConns is half the open-file limit (Go raises the soft limit to
// the hard one at start), leaving the rest for the database, uploads and
// outgoing calls.
func defaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 512
	}
	return int(min(max(rl.Cur/2, 64), 10000))
}
