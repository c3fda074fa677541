package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/hanzoai/deploy/auth"
	"github.com/labstack/echo/v4"
)

// credential says how the request's principal was established.
type credential int

const (
	credentialNone    credential = iota
	credentialBearer             // Authorization: Bearer <ID token>
	credentialCookie             // the session cookie (ambient: subject to SameOrigin)
	credentialForward            // another replica's signed assertion (acceptForward)
)

// authInfo is what Authenticate learned about a request.
type authInfo struct {
	via credential
	// note says why a request is anonymous although it carried a
	// credential (e.g. an expired session), for the 401 message.
	note string
}

// authInfoFrom is what Authenticate learned about the request of ctx (the
// zero authInfo when it did not run).
func authInfoFrom(ctx context.Context) authInfo {
	if st := stateOf(ctx); st != nil {
		return st.authn
	}
	return authInfo{}
}

// withAuth records the request's principal (nil: anonymous) and how it was
// established in its state.
func withAuth(c echo.Context, p *auth.Principal, ai authInfo) {
	st := ensureState(c)
	st.principal, st.authn, st.authenticated = p, ai, true
}

// Authenticate resolves the caller's Principal from "Authorization: Bearer
// <ID token>" or, without that header, from the session cookie, and stores
// it in the request context (auth.PrincipalFrom). The bearer token wins when
// both are present. Identity never comes from anything else a client sets.
//
//   - An Authorization header that is not a valid, unexpired bearer token:
//     401 at once (also when sign-in is disabled, with the reason).
//   - A session cookie that does not verify (expired, sealed by another key):
//     the request continues anonymous, the stale cookie is deleted, and a
//     later 401 says why.
//   - No credential: the request continues anonymous; routes decide.
//
// The sign-in routes (login, callback, logout, userinfo) never fail here:
// for them a bad credential is simply no credential.
func (s *Session) Authenticate() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if st := stateOf(c.Request().Context()); st != nil && st.authenticated {
				return next(c) // a forward, authenticated by its assertion
			}
			r := c.Request()
			lenient := isSessionRoute(c.Path())
			if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
				p, err := s.bearerPrincipal(r.Context(), h)
				if err != nil {
					if lenient {
						withAuth(c, nil, authInfo{})
						return next(c)
					}
					return err
				}
				withAuth(c, p, authInfo{via: credentialBearer})
				return next(c)
			}
			p, err := s.auth.SessionPrincipal(r.Context(), r)
			switch {
			case err == nil:
				withAuth(c, p, authInfo{via: credentialCookie})
			case errors.Is(err, auth.ErrNoSession):
				withAuth(c, nil, authInfo{})
			case errors.Is(err, auth.ErrDisabled):
				withAuth(c, nil, authInfo{note: err.Error()})
			default:
				s.log.LogAttrs(r.Context(), slog.LevelDebug, "session cookie refused", slog.String("cause", err.Error()))
				for _, ck := range s.auth.ClearSessionCookies() {
					c.SetCookie(ck)
				}
				note, reason := "the session is not valid any more", "session_invalid"
				if errors.Is(err, auth.ErrTokenExpired) || errors.Is(err, auth.ErrSessionInvalid) {
					note, reason = "the session has expired", "session_expired"
				}
				s.metrics.Refusal(reason)
				withAuth(c, nil, authInfo{note: note})
			}
			return next(c)
		}
	}
}

// acceptForward authenticates a request another replica forwarded (it
// carries auth.ForwardHeader or forwardedHeader) by its assertion alone:
// the caller's Principal as the forwarding replica verified it, or none
// (the webhook). Authorization and cookies are not looked at; a forward
// whose assertion does not verify is a 401. Other requests pass to
// Authenticate.
func (s *Server) acceptForward(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if h.Get(auth.ForwardHeader) == "" && h.Get(forwardedHeader) == "" {
			return next(c)
		}
		p, err := s.forwardedPrincipal(c)
		if err != nil {
			return err
		}
		withAuth(c, p, authInfo{via: credentialForward})
		return next(c)
	}
}

// bearerPrincipal verifies an Authorization header value.
func (s *Session) bearerPrincipal(ctx context.Context, header string) (*auth.Principal, error) {
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, refusal(http.StatusUnauthorized, "bearer_malformed", "unsupported Authorization header: send Authorization: Bearer <ID token>")
	}
	p, err := s.auth.VerifyShared(ctx, token)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, auth.ErrDisabled):
		return nil, refusal(http.StatusUnauthorized, "signin_disabled", err.Error())
	case errors.Is(err, auth.ErrTokenExpired):
		return nil, refusalCause(http.StatusUnauthorized, "bearer_expired", "the bearer token has expired", err)
	default:
		return nil, refusalCause(http.StatusUnauthorized, "bearer_refused", "the bearer token was refused: it must be an ID token of the configured issuer for this client", err)
	}
}

// isSessionRoute reports whether path is one of the routes that answer
// anyone themselves: the sign-in routes and the health probes.
func isSessionRoute(path string) bool {
	switch path {
	case auth.LoginPath, auth.CallbackPath, logoutPath, userinfoPath, "/v1/deploy/health", "/v1/paas/health",
		argoLoginPath, argoCallbackPath, argoLogoutPath, argoSessionPath, argoUserinfoPath,
		// Argo CD's public settings and version, which its login page reads.
		"/v1/deploy/settings", "/api/v1/settings", "/v1/deploy/version", "/api/v1/version", "/api/version":
		return true
	}
	return false
}

// scopeOf is the caller's Scope (auth.ScopeFor of the request's principal),
// or the 401/403 error to answer.
func scopeOf(c echo.Context) (auth.Scope, error) {
	ctx := c.Request().Context()
	sc, err := auth.ScopeFor(auth.PrincipalFrom(ctx))
	switch {
	case err == nil:
		return sc, nil
	case errors.Is(err, auth.ErrForbidden):
		return auth.Scope{}, refusal(http.StatusForbidden, "no_org", "your account belongs to no organization: ask an administrator to add you to one")
	default:
		msg := "sign in required: send Authorization: Bearer <ID token>, or sign in at " + auth.LoginPath
		if note := authInfoFrom(ctx).note; note != "" {
			msg = "sign in required (" + note + "): send Authorization: Bearer <ID token>, or sign in at " + auth.LoginPath
		}
		return auth.Scope{}, refusal(http.StatusUnauthorized, "signin_required", msg)
	}
}

// RequireScope lets a request through only with a Scope (a validated
// principal with an org, or a SuperAdmin); otherwise 401 or 403 — except
// that a browser navigation (see isNavigation) is redirected to the login
// with a return path to where it was going.
func RequireScope() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if _, err := scopeOf(c); err != nil {
				if isNavigation(c.Request()) {
					return c.Redirect(http.StatusFound, loginRedirect(c.Request()))
				}
				return err
			}
			return next(c)
		}
	}
}

// isNavigation reports whether r is a browser loading a page (a GET that
// should be bounced to the login rather than shown a 401/403): never for a
// script's request (X-Requested-With, an Authorization header, or
// Sec-Fetch-Mode cors, same-origin, no-cors or websocket); otherwise Sec-Fetch-Mode navigate, Sec-Fetch-Dest
// document, or an Accept with text/html and without application/json.
func isNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet || r.Header.Get("X-Requested-With") != "" || r.Header.Get(echo.HeaderAuthorization) != "" {
		return false
	}
	switch strings.ToLower(r.Header.Get("Sec-Fetch-Mode")) {
	case "cors", "same-origin", "no-cors", "websocket":
		return false
	case "navigate":
		return true
	}
	if strings.EqualFold(r.Header.Get("Sec-Fetch-Dest"), "document") {
		return true
	}
	accept := strings.ToLower(strings.Join(r.Header.Values(echo.HeaderAccept), ","))
	return strings.Contains(accept, "text/html") && !strings.Contains(accept, "application/json")
}

// loginRedirect is the login URL returning to r's path and query.
func loginRedirect(r *http.Request) string {
	return auth.LoginPath + "?returnTo=" + url.QueryEscape(auth.SafeReturnPath(r.URL.RequestURI()))
}

// SameOrigin refuses a state-changing request (anything but GET, HEAD,
// OPTIONS) authenticated by the session cookie unless its Origin header —
// or, without one, its Referer — has the origin of publicURL: 403
// "cross-origin request refused". A request without either header, with
// "Origin: null", or with an unparsable publicURL is refused too. Requests
// with a bearer token carry no ambient credential and are not subject to it;
// neither are anonymous ones (the route answers them).
func SameOrigin(publicURL string) echo.MiddlewareFunc {
	want, ok := auth.Origin(publicURL)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
				return next(c)
			}
			if !usesCookie(r) {
				return next(c)
			}
			from := r.Header.Get(echo.HeaderOrigin)
			if from == "" {
				from = r.Header.Get("Referer")
			}
			got, valid := auth.Origin(from)
			if !ok || !valid || got != want {
				return refusal(http.StatusForbidden, "foreign_origin", "cross-origin request refused")
			}
			return next(c)
		}
	}
}

// usesCookie reports whether r is authenticated by the session cookie. When
// Authenticate has not run, a request without a bearer token that carries a
// session cookie counts as one (fail closed).
func usesCookie(r *http.Request) bool {
	if st := stateOf(r.Context()); st != nil && st.authenticated {
		return st.authn.via == credentialCookie || (st.authn.via == credentialNone && auth.CarriesSessionCookie(r))
	}
	scheme, _, _ := strings.Cut(r.Header.Get(echo.HeaderAuthorization), " ")
	return !strings.EqualFold(scheme, "Bearer") && auth.CarriesSessionCookie(r)
}
