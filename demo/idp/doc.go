// Package idp is the demo's identity provider: an OpenID Connect provider
// (github.com/oauth2-proxy/mockoidc) on 127.0.0.1 with a few demo users and
// a "choose who you are" page in front of its authorization endpoint, so
// deployd's real sign-in (authorization code with PKCE, token exchange,
// go-oidc verification) runs unchanged against it.
//
// These are demo identities. Anyone who can reach the page can sign in as
// any of them, the SuperAdmin included; the page says so in a banner and
// Start says so in the log. Nothing outside demo/ imports this package, so
// it cannot be reached from `deployd serve`.
//
// Invariants:
//   - The provider listens on loopback only, signs with an RSA key
//     generated at Start (never mockoidc's published default key), and
//     issues tokens for one client whose id and secret are random per
//     Start.
//   - A chosen user is handed to exactly the authorization request that
//     chose it: the provider's requests are serialized (mockoidc's session
//     store is not safe for concurrent use) and the user queue is emptied
//     after each authorization, so a failed one never leaks its user into
//     the next sign-in, and mockoidc's built-in default user is never
//     issued.
//   - Goroutines: mockoidc's server goroutine, and one that closes the
//     provider when the context given to Start ends. Close stops both; it is
//     idempotent.
package idp
