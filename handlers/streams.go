package handlers

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/stream"
)

// streamApplications: the Argo CD watch stream, filtered by the caller's
// scope first, resumable with Last-Event-ID, ending when the token expires.
func (s *Server) streamApplications(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	req, err := stream.ParseRequest(c.Request(), s.clusterNames)
	if err != nil {
		return errorf(http.StatusBadRequest, err.Error())
	}
	req.Scope = sc
	if p := auth.PrincipalFrom(c.Request().Context()); p != nil {
		req.Expiry = p.Expiry
	}
	return streamError(s.d.Hub.ServeApplications(c.Response(), c.Request(), req))
}

// streamTree: the app's tree now, then again whenever it changes.
func (s *Server) streamTree(c echo.Context) error {
	a, err := s.appFromPath(c, s.d.Snapshots.Snapshot())
	if err != nil {
		return err
	}
	sc, _ := scopeOf(c)
	req := stream.TreeRequest{Scope: sc, Key: a.Key()}
	if p := auth.PrincipalFrom(c.Request().Context()); p != nil {
		req.Expiry = p.Expiry
	}
	err = s.d.Hub.ServeTree(c.Response(), c.Request(), req)
	if errors.Is(err, stream.ErrNotFound) {
		return errNotFound(a.Name)
	}
	return streamError(err)
}

// streamError answers what a stream refused before it started.
func streamError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, stream.ErrExpired):
		return refusal(http.StatusUnauthorized, "token_expired", "the token has expired: sign in again")
	case errors.Is(err, stream.ErrHubStopped):
		return errorf(http.StatusServiceUnavailable, "the server is shutting down; reconnect")
	default:
		return errorCause(http.StatusInternalServerError, "the stream could not start", err)
	}
}
