package handlers

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// apiPrefixes are the path spaces of the API: an unknown path under them is
// a JSON 404 (or a 405 when another method is routed there), never the page.
var apiPrefixes = []string{"/v1", "/api"}

// probeMethods are the methods an unknown method's 405 looks for.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// routeEscaped makes the router match the path as the client wrote it
// (escaped), so an escaped '/' stays inside its segment and every path
// parameter reaches decodeParams still escaped. net/url leaves RawPath
// empty when the escaped form is the canonical one; Echo then routes on
// the decoded Path, which would make a parameter decoded or not depending
// on how it was spelled.
func routeEscaped(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		if u.RawPath == "" {
			u.RawPath = u.EscapedPath()
		}
		return next(c)
	}
}

// decodeParams percent-decodes every path parameter exactly once, before
// any handler or route middleware reads it (clients encode segments with
// encodeURIComponent). A parameter that is not valid percent-encoding is a
// 400 naming it. "%2540" decodes to "%40" and stays that: never '@'.
func decodeParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		names, values := c.ParamNames(), c.ParamValues()
		var decoded []string
		for i, v := range values {
			if i >= len(names) || !strings.Contains(v, "%") {
				continue
			}
			d, err := decodeParam(names[i], v)
			if err != nil {
				return err
			}
			if decoded == nil {
				decoded = slices.Clone(values)
			}
			decoded[i] = d
		}
		if decoded != nil {
			c.SetParamValues(decoded...)
		}
		return next(c)
	}
}

// decodeParam decodes one path parameter's value once.
func decodeParam(name, v string) (string, error) {
	d, err := url.PathUnescape(v)
	if err != nil {
		if name == "*" {
			name = "subresource"
		}
		return "", errorf(http.StatusBadRequest, "the path parameter "+name+" is not valid percent-encoding ("+
			quoteShort(v)+"): write '%' as %25 and encode each segment once")
	}
	return d, nil
}

// mountAPINotFound answers every unrouted path under the API prefixes from
// the router itself: whatever routes are mounted, now or later, a path no
// route matches is a JSON 404 naming it, and a path routed for other methods
// is a 405 with Allow. Paths outside the prefixes fall through to the page.
func (s *Server) mountAPINotFound() {
	for _, p := range apiPrefixes {
		s.e.RouteNotFound(p, s.apiNotFound)
		s.e.RouteNotFound(p+"/*", s.apiNotFound)
	}
}

// apiNotFound: a 405 when the router has the path for another method, else a
// 404 naming the path.
func (s *Server) apiNotFound(c echo.Context) error {
	r := c.Request()
	if allow := s.allowedMethods(r); len(allow) > 0 {
		c.Response().Header().Set(echo.HeaderAllow, strings.Join(allow, ", "))
		if r.Method == http.MethodOptions {
			return c.NoContent(http.StatusNoContent)
		}
		return errorf(http.StatusMethodNotAllowed, r.Method+" is not served at "+quoteShort(r.URL.Path)+"; use "+strings.Join(allow, " or "))
	}
	return errorf(http.StatusNotFound, "no API route at "+quoteShort(r.URL.Path)+"; see the routes of /v1/deploy and /v1/paas")
}

// allowedMethods asks the router which methods have a route (not the API's
// not-found handler) at the request's path.
func (s *Server) allowedMethods(r *http.Request) []string {
	path := echo.GetPath(r)
	var allow []string
	for _, m := range probeMethods {
		if m == r.Method {
			continue
		}
		pc := s.e.NewContext(r, nil)
		s.e.Router().Find(m, path, pc)
		if route := pc.Path(); route != "" && !isNotFoundRoute(route) {
			allow = append(allow, m)
		}
	}
	return allow
}

// isNotFoundRoute reports whether a route path is one of apiNotFound's.
func isNotFoundRoute(route string) bool {
	for _, p := range apiPrefixes {
		if route == p || route == p+"/*" {
			return true
		}
	}
	return false
}
