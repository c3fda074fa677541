package handlers

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
)

// The engine runs on one replica at a time (the holder of its Lease). A
// request only the engine's leader carries out (reconcile, the git
// webhook, suspend and resume, a managed App's rollback or release) that
// reaches another replica is forwarded to the leader, once, and the
// leader's answer is the answer: its status, its body and a few of its
// headers (forwardedAnswerHeaders).
//
// The forward is a request between replicas, not the caller's:
//   - it goes only to a peer (Deps.Peers, configuration): the URL the
//     engine's state ConfigMap names for its leader is refused, and
//     logged, when it is not one of them;
//   - it carries no credential of the caller (no Authorization, no
//     Cookie): the Principal this replica verified travels as an
//     assertion signed with the key the replicas share (auth.Peering),
//     bound to the request, the leader's identity, a time and a nonce;
//     the leader accepts it once, within auth.ForwardWindow, and then
//     applies the same SuperAdmin gate and audit as to a direct request;
//   - the leader proves its answer (auth.ForwardAnswerHeader, over the
//     nonce, the status and the body), and an answer without that proof
//     is dropped.

// forwardedHeader names the forwarding replica on a forwarded request; a
// replica that receives a forward and is not the leader (leadership moved
// in between) answers 503 rather than forwarding again.
const forwardedHeader = "X-Deployd-Forwarded-By"

// forwardedRequestHeaders are the caller's headers a forward keeps: what
// the leader's routes read (the webhook's signatures and event, the body's
// type), and the request's trace. Nothing else passes: no credential, no
// cookie.
var forwardedRequestHeaders = []string{
	echo.HeaderContentType, echo.HeaderAccept, "User-Agent", echo.HeaderXRequestID, "Traceparent", "Tracestate",
	headerGitHubSignature, headerGiteaSignature, headerGitHubEvent, headerGiteaEvent,
	headerGitHubDelivery, headerGiteaDelivery,
}

// forwardedAnswerHeaders are the leader's answer's headers a forward
// passes back: the body's type and when to retry. Set-Cookie, hop-by-hop
// headers and anything else the leader sent stay out.
var forwardedAnswerHeaders = []string{echo.HeaderContentType, echo.HeaderRetryAfter}

// maxForwardedAnswer bounds a leader's answer (a reconcile report of a
// large repository is a few MiB).
const maxForwardedAnswer = 16 << 20

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
	leader, self, err := eng.Leader()
	if self {
		return false, nil
	}
	c.Response().Header().Set(echo.HeaderRetryAfter, "2")
	if err != nil {
		return true, errorf(http.StatusServiceUnavailable, err.Error())
	}
	r := c.Request()
	if r.Header.Get(forwardedHeader) != "" || r.Header.Get(auth.ForwardHeader) != "" {
		return true, errorf(http.StatusServiceUnavailable, "the engine's leader changed while the request was forwarded; try again")
	}
	if err := s.d.Peering.Ready(); err != nil {
		s.d.Log.Warn("forward to the engine's leader refused", "leader", leader.Identity, "reason", err.Error())
		return true, errorf(http.StatusServiceUnavailable, "this replica does not lead the engine and cannot forward to the one that does: "+err.Error())
	}
	if !s.d.Peers.Admits(r.Context(), leader.URL) {
		s.d.Log.Warn("forward to the engine's leader refused: its published URL is not a peer",
			"leader", leader.Identity, "url", leader.URL, "peers", s.d.Peers.String())
		return true, errorf(http.StatusServiceUnavailable, "the engine's leader ("+leader.Identity+") is published at "+quoteShort(leader.URL)+
			", which is not one of this deployd's peers (DEPLOY_PEERS): nothing was forwarded")
	}
	if body == nil && !hasNoBody(r) {
		if body, err = io.ReadAll(r.Body); err != nil {
			return true, errorCause(http.StatusBadRequest, "the request's body could not be read", err)
		}
	}
	target := r.RequestURI
	if !strings.HasPrefix(target, "/") {
		target = r.URL.RequestURI()
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimSuffix(leader.URL, "/")+target, bytes.NewReader(body))
	if err != nil {
		return true, errorf(http.StatusServiceUnavailable, "the engine's leader published no usable URL; try again")
	}
	// The assertion names the request target as it is sent.
	assertion, nonce, err := s.d.Peering.Sign(leader.Identity, r.Method, out.URL.RequestURI(), body, auth.PrincipalFrom(r.Context()))
	if err != nil {
		return true, errorf(http.StatusServiceUnavailable, err.Error())
	}
	for _, k := range forwardedRequestHeaders {
		for _, v := range r.Header.Values(k) {
			out.Header.Add(k, v)
		}
	}
	out.Header.Set(auth.ForwardHeader, assertion)
	out.Header.Set(forwardedHeader, s.d.Peering.Self())
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		out.Header.Set(echo.HeaderXForwardedFor, ip)
	}
	resp, err := s.forwardClient().Do(out)
	if err != nil {
		if r.Context().Err() != nil {
			return true, errorf(http.StatusGatewayTimeout, "the request ended before the engine's leader answered")
		}
		s.d.Log.Warn("forward to the engine's leader failed", "leader", leader.Identity, "url", leader.URL, "error", err.Error())
		return true, errorf(http.StatusBadGateway, "the engine's leader could not be reached; try again in a few seconds")
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardedAnswer+1))
	switch {
	case err != nil && r.Context().Err() != nil:
		return true, errorf(http.StatusGatewayTimeout, "the request ended before the engine's leader answered")
	case err != nil:
		return true, errorf(http.StatusBadGateway, "the engine's leader's answer was cut off; read the engine's state to see whether the request was carried out")
	case len(answer) > maxForwardedAnswer:
		return true, errorf(http.StatusBadGateway, "the engine's leader answered more than 16 MiB; nothing of it was relayed")
	}
	if !s.d.Peering.CheckAnswer(nonce, resp.StatusCode, answer, resp.Header.Get(auth.ForwardAnswerHeader)) {
		s.d.Log.Warn("the engine's leader's answer was dropped: it carries no proof of a peer",
			"leader", leader.Identity, "url", leader.URL, "status", resp.StatusCode)
		return true, errorf(http.StatusBadGateway, "the engine's leader answered without proof that it is a replica of this deployd; its answer was dropped")
	}
	h := c.Response().Header()
	h.Del(echo.HeaderRetryAfter)
	for _, k := range forwardedAnswerHeaders {
		for _, v := range resp.Header.Values(k) {
			h.Add(k, v)
		}
	}
	c.Response().WriteHeader(resp.StatusCode)
	_, _ = c.Response().Write(answer)
	return true, nil
}

// forwardClient carries forwarded requests: a connection to the leader
// fails fast, an answer may take as long as a run, and a redirect is
// never followed (its answer is relayed, or dropped without proof).
func (s *Server) forwardClient() *http.Client {
	s.fwdOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil // replicas reach each other directly
		t.DialContext = (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		s.fwd = &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	})
	return s.fwd
}

// maxForwardedBody bounds the body of a forwarded request this replica
// reads to check its assertion: the largest a route takes (the webhook's).
const maxForwardedBody = webhookBodyLimit

// forwardedPrincipal verifies the assertion of a request another replica
// forwarded: it answers the Principal the assertion carries (nil for the
// webhook), or a 401 that says why the forward was refused. The body is
// read to check its digest and put back. A forward whose signature
// verified gets its answer proven (proveForwardAnswer), refusals included.
func (s *Server) forwardedPrincipal(c echo.Context) (*auth.Principal, error) {
	r := c.Request()
	var body []byte
	if !hasNoBody(r) {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxForwardedBody+1))
		if err != nil || len(b) > maxForwardedBody {
			return nil, refusal(http.StatusUnauthorized, "forward_refused", "forwarded request refused: its body could not be read whole (at most 1 MiB)")
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
	}
	f, err := s.d.Peering.Verify(r.Header.Get(auth.ForwardHeader), r.Method, r.RequestURI, body)
	if f != nil {
		ensureState(c).forward = f
	}
	if err != nil {
		s.d.Log.LogAttrs(r.Context(), slog.LevelWarn, "forwarded request refused",
			slog.String("from", r.Header.Get(forwardedHeader)), slog.String("remote", r.RemoteAddr),
			slog.String("route", c.Path()), slog.String("reason", err.Error()))
		return nil, refusal(http.StatusUnauthorized, "forward_refused", "forwarded request refused: "+err.Error())
	}
	return f.AsPrincipal(), nil
}

// proveForwardAnswer holds the answer of a forwarded request and sends it
// with the proof the forwarding replica checks (auth.ForwardAnswerHeader).
// It runs before audit and authentication, so that refusals are proven
// too; an error is written here, by the error handler, into the held
// answer. Other requests pass untouched.
func (s *Server) proveForwardAnswer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Header.Get(auth.ForwardHeader) == "" {
			return next(c)
		}
		res := c.Response()
		held := &heldAnswer{header: http.Header{}, status: http.StatusOK}
		w := res.Writer
		res.Writer = held
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		res.Writer = w
		for k, v := range held.header {
			w.Header()[k] = v
		}
		if st := stateOf(c.Request().Context()); st != nil && st.forward != nil {
			w.Header().Set(auth.ForwardAnswerHeader, s.d.Peering.ProveAnswer(st.forward.Nonce, held.status, held.body.Bytes()))
		}
		w.WriteHeader(held.status)
		_, _ = w.Write(held.body.Bytes())
		return nil
	}
}

// heldAnswer is a response held whole until it is proven.
type heldAnswer struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (h *heldAnswer) Header() http.Header { return h.header }

func (h *heldAnswer) WriteHeader(code int) {
	if !h.wrote {
		h.status, h.wrote = code, true
	}
}

func (h *heldAnswer) Write(b []byte) (int, error) {
	h.wrote = true
	return h.body.Write(b)
}
