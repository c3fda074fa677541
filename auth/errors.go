package auth

import "errors"

// Errors of sign-in and verification. Functions return them wrapped with
// their cause (test with errors.Is); the kind alone is safe to show a
// client, the cause belongs in the log. None of them ever carries a token.
var (
	// ErrDisabled: sign-in is not available (no public URL, issuer not
	// reachable yet, bad configuration). Status().Reason says why.
	ErrDisabled = errors.New("sign-in disabled")

	// ErrNoSession: the request carries no session cookie.
	ErrNoSession = errors.New("no session")
	// ErrSessionInvalid: a session cookie that was not sealed by this server
	// (another key, altered), or whose lifetime is over.
	ErrSessionInvalid = errors.New("session cookie invalid")

	// ErrTokenExpired: the token's exp has passed.
	ErrTokenExpired = errors.New("token expired")
	// ErrTokenRefused: the token failed verification (signature, algorithm,
	// issuer, audience, nonce, malformed).
	ErrTokenRefused = errors.New("token refused")

	// ErrNoFlow: the callback came without a flow cookie, or with one this
	// server did not seal.
	ErrNoFlow = errors.New("no sign-in in progress")
	// ErrFlowExpired: the flow cookie is older than its 10 minutes.
	ErrFlowExpired = errors.New("sign-in took too long")
	// ErrStateMismatch: the state the provider returned is not the flow's.
	ErrStateMismatch = errors.New("sign-in state mismatch")
	// ErrReplayed: this flow was already completed once.
	ErrReplayed = errors.New("sign-in already completed")
	// ErrProviderRefused: the provider answered the authorization request
	// with an error (the user declined, the client is not allowed…).
	ErrProviderRefused = errors.New("the identity provider refused the sign-in")
	// ErrMissingCode: the callback has no authorization code.
	ErrMissingCode = errors.New("no authorization code")
	// ErrExchangeRefused: the provider refused to exchange the code.
	ErrExchangeRefused = errors.New("the identity provider refused the authorization code")
	// ErrProviderUnreachable: the provider could not be reached to exchange
	// the code.
	ErrProviderUnreachable = errors.New("the identity provider could not be reached")
	// ErrSessionTooLarge: the ID token is too large to keep in cookies.
	ErrSessionTooLarge = errors.New("token too large for a session cookie")
)

// kindError pairs an error kind (one of the Err values above) with its
// cause; errors.Is matches both.
type kindError struct {
	kind  error
	cause error
}

func (e *kindError) Error() string {
	if e.cause == nil {
		return e.kind.Error()
	}
	return e.kind.Error() + ": " + e.cause.Error()
}

func (e *kindError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

func wrapKind(kind, cause error) error { return &kindError{kind: kind, cause: cause} }

// disabledError is ErrDisabled with the reason Status reports.
type disabledError struct{ reason string }

func (e *disabledError) Error() string { return e.reason }
func (e *disabledError) Is(target error) bool {
	return target == ErrDisabled
}
