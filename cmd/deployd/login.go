package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hanzoai/deploy/auth"
)

const loginUsage = `usage: deployd login --server URL [--no-browser] [--timeout 5m] [--insecure-http]

Signs in to a deployd server through its identity provider, as the page
does: OpenID Connect authorization code with PKCE, the code received on a
loopback address (127.0.0.1, any free port). The server advertises what
this needs (issuer, the CLI's client id, the loopback redirect) in
/api/v1/settings. The tokens are kept in $XDG_CONFIG_HOME/deployd/%s
(mode 0600), replacing any kept for that server; later commands to it use
them, refreshed when they expire (at the identity provider the server
names, only while it names the one they came from), and the server
becomes the default for commands without --server. --token or
DEPLOYD_TOKEN, when given, take precedence (CI). A plain http:// server
is refused unless it is loopback or --insecure-http is given.

flags:
`

const loginExample = `
examples:
  deployd login --server http://127.0.0.1:8080
  deployd login --server https://deploy.example.com --no-browser
  deployd app list
`

func runLogin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", os.Getenv("DEPLOYD_SERVER"), "deployd server URL, e.g. http://127.0.0.1:8080 (env DEPLOYD_SERVER)")
	noBrowser := fs.Bool("no-browser", false, "print the sign-in URL instead of opening a browser")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the sign-in in the browser")
	insecureHTTP := addInsecureHTTPFlag(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, loginUsage, credentialsFile)
		fs.PrintDefaults()
		fmt.Fprint(stderr, loginExample)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("login takes no arguments (got %q): deployd login --server URL", fs.Arg(0))
	}
	if *timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration like 5m", *timeout)
	}
	// Login replaces the server's sign-in: it neither reads nor refreshes
	// the tokens kept for it (they may have expired, or come from an
	// identity provider the server no longer names).
	c, err := newAPIClient(serverOf(*server), "")
	if err != nil {
		return err
	}
	if err := refuseCleartext(c.server, *insecureHTTP); err != nil {
		return err
	}
	oc, err := c.signInSettings(ctx)
	if err != nil {
		return err
	}
	if oc.Issuer == "" {
		return failed("%s has no sign-in configured (it names no identity provider): pass a token with --token or DEPLOYD_TOKEN", c.server)
	}
	clientID := oc.CLIClientID
	if clientID == "" {
		clientID = oc.ClientID
	}
	redirect, err := url.Parse(oc.CLIRedirectURI)
	if oc.CLIRedirectURI == "" {
		redirect, err = url.Parse(auth.CLIRedirectURI)
	}
	if err != nil || redirect.Scheme != "http" || !auth.IsLoopbackHost(redirect.Hostname()) {
		return failed("%s advertises %q as the CLI's redirect, which is not a loopback http URL", c.server, oc.CLIRedirectURI)
	}

	octx := oidc.ClientContext(ctx, c.http)
	provider, err := oidc.NewProvider(octx, oc.Issuer)
	if err != nil {
		return failed("the identity provider %s cannot be reached: %v", oc.Issuer, err)
	}
	scopes := oc.Scopes
	if len(scopes) == 0 {
		scopes = []string{oidc.ScopeOpenID, "profile", "email"}
	}
	var meta struct {
		Scopes []string `json:"scopes_supported"`
	}
	if provider.Claims(&meta) == nil && slices.Contains(meta.Scopes, oidc.ScopeOfflineAccess) && !slices.Contains(scopes, oidc.ScopeOfflineAccess) {
		scopes = append(slices.Clone(scopes), oidc.ScopeOfflineAccess) // a refresh token
	}

	addr := redirect.Host // a port the provider may require, else any free one
	if redirect.Port() == "" {
		addr = net.JoinHostPort(redirect.Hostname(), "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return failed("listen for the sign-in's redirect on %s: %v", redirect.Host, err)
	}
	defer ln.Close()
	redirect.Host = ln.Addr().String()
	cfg := oauth2.Config{ClientID: clientID, Endpoint: provider.Endpoint(), RedirectURL: redirect.String(), Scopes: scopes}
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))

	type result struct {
		tok *oauth2.Token
		err error
	}
	done := make(chan result, 1)
	finish := func(r result) {
		select {
		case done <- r:
		default:
		}
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != redirect.Path {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if q.Get("state") != state {
			loginPage(w, http.StatusBadRequest, "This is not the sign-in deployd login started. Run deployd login again.")
			return
		}
		if e := q.Get("error"); e != "" {
			msg := e
			if d := q.Get("error_description"); d != "" {
				msg += ": " + d
			}
			loginPage(w, http.StatusForbidden, "The identity provider did not sign you in ("+msg+"). Return to the terminal.")
			finish(result{err: failed("the identity provider did not sign you in: %s", msg)})
			return
		}
		tok, err := cfg.Exchange(octx, q.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			loginPage(w, http.StatusBadGateway, "The sign-in could not be completed. Return to the terminal.")
			finish(result{err: failed("the identity provider refused the sign-in's code (%s)", oauthReason(err))})
			return
		}
		loginPage(w, http.StatusOK, "Signed in to deployd at "+c.server+". You can close this tab and return to the terminal.")
		finish(result{tok: tok})
	})}
	go srv.Serve(ln) // returns when srv is shut down below
	// Shutdown, not Close: the page that says the sign-in is done may still
	// be on its way to the browser when the result arrives here.
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	fmt.Fprintf(stderr, "To sign in to %s, open this URL in a browser:\n\n  %s\n\n", c.server, authURL)
	if !*noBrowser {
		if err := openBrowser(authURL); err != nil {
			fmt.Fprintf(stderr, "(no browser could be opened: %v; open the URL yourself)\n", err)
		}
	}
	fmt.Fprintf(stderr, "Waiting for the browser on %s …\n", redirect.String())

	var r result
	select {
	case r = <-done:
	case <-time.After(*timeout):
		return failed("no sign-in came back within %v: run deployd login again (--timeout sets the wait)", *timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.err != nil {
		return r.err
	}
	audiences := []string{clientID}
	if oc.ClientID != "" && oc.ClientID != clientID {
		audiences = append(audiences, oc.ClientID)
	}
	idToken, expiry, err := verifyIDToken(octx, provider, audiences, r.tok, nonce)
	if err != nil {
		return failed("%v", err)
	}
	c.token = idToken
	var who struct {
		LoggedIn   bool   `json:"loggedIn"`
		Username   string `json:"username"`
		Org        string `json:"org"`
		SuperAdmin bool   `json:"superAdmin"`
	}
	if _, err := c.call(ctx, http.MethodGet, "/api/v1/session/userinfo", nil, &who); err != nil {
		return err
	}
	if !who.LoggedIn {
		return failed("%s does not accept the identity provider's token: is the CLI's client (%s) one it trusts?", c.server, clientID)
	}
	creds, err := loadCredentials()
	if err != nil {
		return err
	}
	creds.Current = c.server
	creds.Servers[c.server] = &serverCredentials{Issuer: oc.Issuer, ClientID: clientID, Audiences: audiences, IDToken: idToken,
		RefreshToken: r.tok.RefreshToken, Expiry: expiry, User: who.Username}
	if err := creds.save(); err != nil {
		return fmt.Errorf("keep the sign-in: %w", err)
	}
	role := "org " + who.Org
	if who.SuperAdmin {
		role = "SuperAdmin"
	}
	fmt.Fprintf(stdout, "Signed in to %s as %s (%s).\n", c.server, who.Username, role)
	return nil
}

// serverSignIn is the sign-in a server announces in GET /api/v1/settings
// (Argo CD's oidcConfig): its identity provider, its client and the
// CLI's, the CLI's loopback redirect and the scopes. Issuer is empty when
// the server has no sign-in.
type serverSignIn struct {
	Issuer         string   `json:"issuer"`
	ClientID       string   `json:"clientID"`
	CLIClientID    string   `json:"cliClientID"`
	CLIRedirectURI string   `json:"cliRedirectURI"`
	Scopes         []string `json:"scopes"`
}

// signInSettings asks the server for its sign-in, without a token.
func (c *apiClient) signInSettings(ctx context.Context) (serverSignIn, error) {
	var settings struct {
		OIDCConfig serverSignIn `json:"oidcConfig"`
	}
	anonymous := &apiClient{server: c.server, http: c.http}
	if _, err := anonymous.call(ctx, http.MethodGet, "/api/v1/settings", nil, &settings); err != nil {
		return serverSignIn{}, err
	}
	return settings.OIDCConfig, nil
}

const logoutUsage = `usage: deployd logout [--server URL]

Forgets the sign-in kept for a server (the last one signed in to by default).

flags:
`

// runLogout removes a server's entry from the credentials file.
func runLogout(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("logout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", os.Getenv("DEPLOYD_SERVER"), "deployd server URL (env DEPLOYD_SERVER; default: the last one signed in to)")
	fs.Usage = func() {
		fmt.Fprint(stderr, logoutUsage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, "\nexample:\n  deployd logout --server http://127.0.0.1:8080\n")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	creds, err := loadCredentials()
	if err != nil {
		return err
	}
	s := strings.TrimSuffix(*server, "/")
	if s == "" {
		s = creds.Current
	}
	if creds.Servers[s] == nil {
		fmt.Fprintf(stdout, "Not signed in to %s.\n", orDash(s))
		return nil
	}
	delete(creds.Servers, s)
	if creds.Current == s {
		creds.Current = ""
	}
	if err := creds.save(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Signed out of %s (the identity provider's session, if any, is its own).\n", s)
	return nil
}

// loginPage answers the browser at the end of the sign-in.
func loginPage(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>deployd login</title><body style=\"font-family:sans-serif;margin:3em\"><p id=\"deployd-login\">%s</p></body>", html.EscapeString(msg))
}

// openBrowser asks the desktop to open u.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it; its outcome is the browser's
	return nil
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
