package cli

import (
	"net"
	"net/http"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"appkb/handlers"
	"appkb/handlers/admission"
	"appkb/handlers/ratelimit"
)

// limitOptions are the serve options that protect the server from
// overload and from slow, idle or oversized requests (rows of serveTable).
type limitOptions struct {
	maxConns, maxInflight, bodyRate, maxText int
	queueWait, headerTime, bodyTime, bodyMax time.Duration
	writeTime, idleTime                      time.Duration
	authFails                                float64
}

// handlerLimits are the limits the HTTP handlers enforce.
func (f *limitOptions) handlerLimits() handlers.Limits {
	return handlers.Limits{
		Admission:      admission.New(f.maxInflight, f.queueWait),
		BodyTimeout:    f.bodyTime,
		BodyMinRate:    f.bodyRate,
		BodyMaxTimeout: f.bodyMax,
		WriteTimeout:   f.writeTime,
		MaxText:        f.maxText,
		UnknownKeys:    ratelimit.New(f.authFails, int(max(1, 4*f.authFails))),
	}
}

// configure sets the server's header, idle and header-size limits. Body
// and write deadlines are set per request by the handlers (see
// handlers.Limits), not here, so that streams are not cut off by a deadline
// meant for uploads.
func (f *limitOptions) configure(s *http.Server) {
	s.ReadHeaderTimeout = f.headerTime
	s.IdleTimeout = f.idleTime
	s.MaxHeaderBytes = 64 << 10
}

// listen opens addr with at most --max-conns connections accepted at once;
// further clients wait in the kernel's backlog instead of using up file
// descriptors.
func (f *limitOptions) listen(addr string) (net.Listener, int, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	n := f.maxConns
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
