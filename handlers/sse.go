package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"appkb/handlers/sse"
	"appkb/internal/run/flows"
)

// answer sends the answer of a run: one JSON object for a blocking
// request, the run's event stream otherwise.
func (s *Server) answer(c echo.Context, run *flows.Run, streaming bool) error {
	if !streaming {
		res, err := run.Wait()
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res.Body)
	}
	return s.pump(c, run, sse.Dify)
}

// pump streams run's events in framing f (see sse.Streamer.Pump).
func (s *Server) pump(c echo.Context, run *flows.Run, f sse.Framing) error {
	return (&sse.Streamer{Ping: s.pingInterval, Log: s.log}).Pump(c, run, f)
}
