package handlers

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
)

// requestState is everything the middleware chain adds to a request, in
// one value allocated once per request, which is also the request's
// context: the chain's first step (Server.front) installs it with the one
// WithContext of the request, and the later steps fill in its fields
// rather than wrapping the context again. It is never pooled: a handler may
// hand its context to work that outlives the request.
//
// The fields are written by the request's own goroutine before its handler
// runs (Authenticate, audit) and only read after that.
type requestState struct {
	// Context is the request's context as it arrived.
	context.Context

	// next is the route's handler (its own middleware applied): where the
	// chain, composed once, goes on (Server.front).
	next echo.HandlerFunc

	// principal is the caller (nil: anonymous), authn how it was
	// established; authenticated says Authenticate ran.
	principal     *auth.Principal
	authn         authInfo
	authenticated bool

	// audit is what a write handler did, for its audit line (nil for a
	// read).
	audit *auditRecord

	// forward is the assertion of a request another replica forwarded,
	// once its signature verified (nil otherwise).
	forward *auth.Forward
}

// stateKey is the context key of the request's requestState.
type stateKey struct{}

// principalKey is auth's key for the Principal, which requestState answers
// itself (auth.PrincipalKey).
var principalKey = auth.PrincipalKey()

// Value answers the state itself, and the principal under auth's key, so
// auth.PrincipalFrom finds it; anything else is the arriving context's.
func (st *requestState) Value(key any) any {
	switch key {
	case stateKey{}:
		return st
	case principalKey:
		if st.principal != nil {
			return st.principal
		}
	}
	return st.Context.Value(key)
}

// stateOf is the request's state, or nil when no step of the chain put one
// in ctx.
func stateOf(ctx context.Context) *requestState {
	st, _ := ctx.Value(stateKey{}).(*requestState)
	return st
}

// ensureState is c's request state, installed now when the chain did not
// (a middleware mounted on its own, as in tests).
func ensureState(c echo.Context) *requestState {
	r := c.Request()
	if st := stateOf(r.Context()); st != nil {
		return st
	}
	st := &requestState{Context: r.Context()}
	c.SetRequest(r.WithContext(st))
	return st
}
