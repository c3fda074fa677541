package handlers

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"
)

// The engine runs on one replica at a time (the holder of its Lease). A
// request only the engine's leader carries out (reconcile, the git
// webhook, suspend and resume, a managed App's rollback or release) that
// reaches another replica is forwarded to the leader unchanged, and the
// leader's answer is the answer: its status, headers and body. The leader
// authenticates and authorizes it as it would any request.

// forwardedHeader marks a forwarded request with the forwarding replica;
// a replica that receives one and is not the leader (leadership moved in
// between) answers 503 rather than forwarding again.
const forwardedHeader = "X-Deployd-Forwarded-By"

// onLeader is the middleware of the engine's leader-only routes.
func (s *Server) onLeader(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if handled, err := s.forwardToLeader(c, s.routeEngine(c), nil); handled {
			return err
		}
		return next(c)
	}
}

// forwardToLeader forwards the request to the leader of eng (one
// cluster's engine: each has its own Lease) when this replica is not it,
// and reports whether it did (the answer is then written, or err says why
// it could not be). body is the request's body when a handler already
// read it (nil: the body is still unread).
func (s *Server) forwardToLeader(c echo.Context, eng Engine, body []byte) (bool, error) {
	if eng == nil {
		return false, nil
	}
	target, self, err := eng.Leader()
	if self {
		return false, nil
	}
	if err != nil {
		c.Response().Header().Set("Retry-After", "2")
		return true, errorf(http.StatusServiceUnavailable, err.Error())
	}
	r := c.Request()
	if r.Header.Get(forwardedHeader) != "" {
		c.Response().Header().Set("Retry-After", "2")
		return true, errorf(http.StatusServiceUnavailable, "the engine's leader changed while the request was forwarded; try again")
	}
	u, err := url.Parse(target)
	if err != nil {
		return true, errorf(http.StatusServiceUnavailable, "the engine's leader published no usable URL; try again")
	}
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	var failed error
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // the leader checks the same origin
			pr.Out.Header.Set(forwardedHeader, "1")
			pr.SetXForwarded()
		},
		Transport:     s.forwardTransport(),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			failed = err
		},
	}
	proxy.ServeHTTP(c.Response(), r)
	if failed != nil {
		c.Response().Header().Set("Retry-After", "2")
		if errors.Is(failed, r.Context().Err()) && r.Context().Err() != nil {
			return true, errorf(http.StatusGatewayTimeout, "the request ended before the engine's leader answered")
		}
		return true, errorf(http.StatusBadGateway, "the engine's leader could not be reached; try again in a few seconds")
	}
	return true, nil
}

// forwardTransport is the client of forwarded requests: a connection to
// the leader fails fast; an answer may take as long as a run.
func (s *Server) forwardTransport() http.RoundTripper {
	s.fwdOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		s.fwd = t
	})
	return s.fwd
}
