package handlers

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/metrics"
)

const (
	logoutPath   = "/v1/deploy/logout"
	userinfoPath = "/v1/deploy/session/userinfo"

	// Argo CD's paths of the same flow, for its UI: /auth/login and
	// /auth/callback lead into the sign-in above (the identity provider
	// still returns to CallbackPath), /auth/logout and DELETE
	// /api/v1/session end the session.
	argoLoginPath    = "/auth/login"
	argoCallbackPath = "/auth/callback"
	argoLogoutPath   = "/auth/logout"
	argoSessionPath  = "/api/v1/session"
	argoUserinfoPath = "/api/v1/session/userinfo"
)

// Session serves the sign-in routes and the authentication middleware.
type Session struct {
	auth    *auth.Authenticator
	log     *slog.Logger
	metrics *metrics.Metrics // nil: none recorded
}

// NewSession returns the sign-in routes backed by a.
func NewSession(a *auth.Authenticator, log *slog.Logger) *Session {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Session{auth: a, log: log}
}

// Register mounts the sign-in routes:
//
//	GET  /v1/deploy/login?returnTo=   302 to the identity provider (503 when sign-in is disabled)
//	GET  /v1/deploy/callback          completes the sign-in, 302 to the return path
//	POST /v1/deploy/logout            ends the session
//	GET  /v1/deploy/session/userinfo  who is signed in (never 401)
//
// and Argo CD's paths of the same flow: GET /auth/login?return_url=
// (an absolute URL of this site or a path), GET /auth/callback (302 to
// /v1/deploy/callback with its query), GET
// /auth/logout (302 to /), DELETE /api/v1/session and GET
// /api/v1/session/userinfo.
func (s *Session) Register(e *echo.Echo) {
	e.GET(auth.LoginPath, s.login)
	e.GET(auth.CallbackPath, s.callback)
	e.POST(logoutPath, s.logout)
	e.GET(userinfoPath, s.userinfo)

	e.GET(argoLoginPath, s.argoLogin)
	e.GET(argoCallbackPath, s.argoCallback)
	e.GET(argoLogoutPath, s.argoLogout)
	e.DELETE(argoSessionPath, s.logout)
	e.GET(argoUserinfoPath, s.userinfo)
}

// argoLogin is Argo CD's /auth/login: return_url is the page to go back to.
func (s *Session) argoLogin(c echo.Context) error {
	return s.startLogin(c, auth.ReturnPathFromURL(c.QueryParam("return_url"), s.auth.PublicOrigin()))
}

// argoCallback hands Argo CD's /auth/callback over to deployd's callback,
// query and all: the sign-in flow's cookie is scoped to that path.
func (s *Session) argoCallback(c echo.Context) error {
	noStore(c)
	to := auth.CallbackPath
	if q := c.Request().URL.RawQuery; q != "" {
		to += "?" + q
	}
	return c.Redirect(http.StatusFound, to)
}

// argoLogout is Argo CD's /auth/logout, a navigation: the session ends and
// the browser goes to the start page.
func (s *Session) argoLogout(c echo.Context) error {
	noStore(c)
	for _, ck := range s.auth.ClearSessionCookies() {
		c.SetCookie(ck)
	}
	return c.Redirect(http.StatusFound, "/")
}

func noStore(c echo.Context) {
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
}

func (s *Session) login(c echo.Context) error {
	return s.startLogin(c, c.QueryParam("returnTo"))
}

func (s *Session) startLogin(c echo.Context, returnTo string) error {
	noStore(c)
	l, err := s.auth.StartLogin(returnTo)
	if err != nil {
		if errors.Is(err, auth.ErrDisabled) {
			return errorf(http.StatusServiceUnavailable, err.Error())
		}
		return errorCause(http.StatusInternalServerError, "sign-in could not start", err)
	}
	c.SetCookie(l.Cookie)
	return c.Redirect(http.StatusFound, l.AuthURL)
}

func (s *Session) callback(c echo.Context) error {
	noStore(c)
	// A flow is used once, whatever the outcome.
	c.SetCookie(s.auth.ClearFlowCookie())
	done, err := s.auth.FinishLogin(c.Request().Context(), c.Request())
	if err != nil {
		answer, reason := callbackError(err)
		s.metrics.SignIn(reason)
		return answer
	}
	for _, ck := range done.Cookies {
		c.SetCookie(ck)
	}
	p := done.Principal
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "signed in",
		slog.String("subject", p.Subject), slog.String("username", p.Username), slog.String("org", p.Org),
		slog.Bool("superAdmin", p.SuperAdmin), slog.Bool("orgAdmin", p.OrgAdmin), slog.Time("until", p.Expiry))
	if _, err := auth.ScopeFor(p); err != nil {
		s.metrics.SignIn("no_org")
		// Going back to a protected page would bounce to the login again,
		// and the provider would sign the same account in: say why instead.
		return errorf(http.StatusForbidden, "signed in as "+p.Username+", but the account belongs to no organization: ask an administrator to add you to one")
	}
	s.metrics.SignIn("ok")
	return c.Redirect(http.StatusFound, done.ReturnTo)
}

// callbackError maps a sign-in failure to a status and a safe message; the
// cause (never a token) goes to the log. reason names the failure for
// metrics.
func callbackError(err error) (answer error, reason string) {
	const again = ": start again at " + auth.LoginPath
	for _, m := range []struct {
		kind   error
		code   int
		reason string
		msg    string
	}{
		{auth.ErrNoFlow, http.StatusBadRequest, "no_flow", "no sign-in in progress (its cookie is missing or not valid)" + again},
		{auth.ErrFlowExpired, http.StatusBadRequest, "flow_expired", "the sign-in took longer than 10 minutes" + again},
		{auth.ErrStateMismatch, http.StatusBadRequest, "state_mismatch", "sign-in state mismatch" + again},
		{auth.ErrReplayed, http.StatusBadRequest, "replayed", "this sign-in was already completed" + again},
		{auth.ErrProviderRefused, http.StatusForbidden, "provider_refused", "the identity provider refused the sign-in"},
		{auth.ErrMissingCode, http.StatusBadRequest, "missing_code", "the identity provider sent no authorization code" + again},
		{auth.ErrExchangeRefused, http.StatusBadRequest, "exchange_refused", "the identity provider refused the authorization code" + again},
		{auth.ErrProviderUnreachable, http.StatusBadGateway, "provider_unreachable", "the identity provider could not be reached: try again"},
		{auth.ErrTokenExpired, http.StatusUnauthorized, "token_expired", "the identity provider issued a token that has already expired: check the clocks of deployd and the identity provider"},
		{auth.ErrTokenRefused, http.StatusUnauthorized, "token_refused", "the identity provider's token was refused"},
		{auth.ErrSessionTooLarge, http.StatusBadGateway, "session_too_large", "the identity provider's token is too large to keep in a session cookie"},
	} {
		if errors.Is(err, m.kind) {
			return errorCause(m.code, m.msg, err), m.reason
		}
	}
	if errors.Is(err, auth.ErrDisabled) {
		return errorf(http.StatusServiceUnavailable, err.Error()), "disabled"
	}
	return errorCause(http.StatusInternalServerError, "sign-in failed", err), "error"
}

// loggedOut is the body of logout and of userinfo for an anonymous caller.
type loggedOut struct {
	LoggedIn bool   `json:"loggedIn"`
	LoginURL string `json:"loginUrl"`
}

func (s *Session) logout(c echo.Context) error {
	noStore(c)
	for _, ck := range s.auth.ClearSessionCookies() {
		c.SetCookie(ck)
	}
	return c.JSON(http.StatusOK, loggedOut{LoginURL: auth.LoginPath})
}

// userInfo is Argo CD's UserInfo (loggedIn, username, iss, groups) plus
// what the dashboard needs to decide what to show.
type userInfo struct {
	LoggedIn   bool     `json:"loggedIn"`
	Username   string   `json:"username"`
	Issuer     string   `json:"iss"`
	Groups     []string `json:"groups"`
	Org        string   `json:"org,omitempty"`
	SuperAdmin bool     `json:"superAdmin"`
	OrgAdmin   bool     `json:"orgAdmin"`
}

func (s *Session) userinfo(c echo.Context) error {
	noStore(c)
	r := c.Request()
	p := auth.PrincipalFrom(r.Context())
	if p == nil {
		// Authenticate did not run (or found nothing): resolve leniently;
		// any failure is simply "not signed in".
		if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
			p, _ = s.bearerPrincipal(r.Context(), h)
		} else {
			p, _ = s.auth.SessionPrincipal(r.Context(), r)
		}
	}
	if p == nil {
		return c.JSON(http.StatusOK, loggedOut{LoginURL: auth.LoginPath})
	}
	groups := p.Groups
	if groups == nil {
		groups = []string{}
	}
	return c.JSON(http.StatusOK, userInfo{
		LoggedIn: true, Username: p.Username, Issuer: p.Issuer, Groups: groups,
		Org: p.Org, SuperAdmin: p.SuperAdmin, OrgAdmin: p.OrgAdmin,
	})
}
