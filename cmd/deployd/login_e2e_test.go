package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/hydratest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/demo/idp"
)

// startLogin runs deployd login --no-browser for server in the background
// and answers the sign-in URL it prints, and the command's outcome.
func startLogin(t *testing.T, ctx context.Context, server string) (string, <-chan error, *bytes.Buffer) {
	t.Helper()
	pr, pw := io.Pipe()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"login", "--server", server, "--no-browser", "--timeout", "2m"}, &out, pw)
		pw.Close()
		done <- err
	}()
	urls := make(chan string, 1)
	go func() { // reads what login prints until it ends
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "http") {
				select {
				case urls <- line:
				default:
				}
			}
		}
	}()
	select {
	case u := <-urls:
		return u, done, &out
	case err := <-done:
		t.Fatalf("login ended before it printed a URL: %v\n%s", err, out.String())
	case <-time.After(30 * time.Second):
		t.Fatal("login printed no sign-in URL in 30 s")
	}
	return "", nil, nil
}

// isolatedConfig points the CLI at an empty config folder of the test's.
func isolatedConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("DEPLOYD_SERVER", "")
	t.Setenv("DEPLOYD_TOKEN", "")
	return dir
}

func readCredentials(t *testing.T, dir string) (*credentials, os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, "deployd", credentialsFile)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("the sign-in was not kept: %v", err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var c credentials
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c, fi.Mode().Perm()
}

// cliRun runs deployd with args and answers its output and exit code.
func cliRun(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, &out, &errb)
	if err != nil {
		return errb.String() + err.Error(), exitCode(err)
	}
	return out.String(), 0
}

// TestLoginWithHydra: deployd login against a server whose identity
// provider is real Hydra, the browser's part driven in Chromium: the
// loopback flow completes, the tokens are kept in a 0600 file, later
// commands use them without --server or --token, and an expired ID token
// is refreshed (with the refresh token, at Hydra) on the next command.
func TestLoginWithHydra(t *testing.T) {
	requireChromium(t)
	c := clustertest.Start(t)
	h := hydratest.Start(t)
	web := h.CreateClient(t, hydratest.ClientOptions{})
	// Commands refresh a token 10 s before it expires: the lifespan leaves
	// the sign-in and the first command a margin beyond that, on a loaded
	// machine too.
	const lifespan = 40 * time.Second
	cli := h.CreateClient(t, hydratest.ClientOptions{Public: true, RedirectURIs: []string{auth.CLIRedirectURI}, TokenLifespan: lifespan})
	env := startPlaneWith(t, c.Config, func(pc *planeConfig) {
		pc.Auth.Issuer, pc.Auth.ClientID, pc.Auth.ClientSecret, pc.Auth.CLIClientID = h.Issuer, web.ID, web.Secret, cli.ID
	})
	env.waitReady(t, 30*time.Second)
	h.SetIdentity(hydratest.Identity{Subject: admin.Subject, Claims: admin.Extra})
	dir := isolatedConfig(t)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	authURL, done, out := startLogin(t, ctx, env.URL)
	if u, err := url.Parse(authURL); err != nil || !strings.HasPrefix(authURL, h.Issuer) ||
		u.Query().Get("client_id") != cli.ID || u.Query().Get("code_challenge_method") != "S256" ||
		!strings.HasPrefix(u.Query().Get("redirect_uri"), "http://127.0.0.1:") {
		t.Fatalf("the sign-in URL %s is not Hydra's authorization endpoint for the CLI's client with PKCE and a loopback redirect", authURL)
	}
	b := newBrowser(t, ctx)
	b.do("open the sign-in URL", chromedp.Navigate(authURL))
	b.waitFor("the loopback page says signed in", `(document.getElementById('deployd-login') || {}).textContent?.startsWith('Signed in')`, 30*time.Second)
	if err := <-done; err != nil {
		t.Fatalf("login: %v\n%s", err, out.String())
	}
	if want := "Signed in to " + env.URL + " as root (SuperAdmin)."; !strings.Contains(out.String(), want) {
		t.Fatalf("login printed %q, want %q", out.String(), want)
	}
	creds, mode := readCredentials(t, dir)
	if mode != 0o600 {
		t.Fatalf("the credentials file has mode %v, want 0600", mode)
	}
	if fi, err := os.Stat(filepath.Join(dir, "deployd")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the credentials folder: %v %v, want mode 0700", fi.Mode().Perm(), err)
	}
	first := creds.Servers[env.URL]
	if creds.Current != env.URL || first == nil || first.IDToken == "" || first.RefreshToken == "" || first.ClientID != cli.ID {
		t.Fatalf("kept: current %q, entry %+v", creds.Current, first)
	}

	// Later commands use the kept sign-in: no --server, no --token.
	list, code := cliRun(t, "app", "list", "-o", "json")
	var items struct{ Items []json.RawMessage }
	if code != 0 || json.Unmarshal([]byte(list), &items) != nil {
		t.Fatalf("app list with the kept sign-in: exit %d\n%s", code, list)
	}
	if again, _ := readCredentials(t, dir); again.Servers[env.URL].IDToken != first.IDToken {
		t.Fatal("a command refreshed a token that had not expired")
	}

	// Once the ID token has expired, the next command refreshes it.
	time.Sleep(time.Until(first.Expiry) + time.Second)
	if code := env.send(t, nil, http.MethodGet, "/api/v1/applications", first.IDToken, "").code; code != http.StatusUnauthorized {
		t.Fatalf("the expired token answers %d, want 401: the refresh below would prove nothing", code)
	}
	if list, code := cliRun(t, "app", "list", "-o", "json"); code != 0 {
		t.Fatalf("app list after the token expired: exit %d\n%s", code, list)
	}
	creds, mode = readCredentials(t, dir)
	refreshed := creds.Servers[env.URL]
	if refreshed.IDToken == first.IDToken || !refreshed.Expiry.After(first.Expiry) || mode != 0o600 {
		t.Fatalf("after expiry: a new token %v, expiry %v → %v, mode %v", refreshed.IDToken != first.IDToken, first.Expiry, refreshed.Expiry, mode)
	}
	if code := env.send(t, nil, http.MethodGet, "/api/v1/applications", refreshed.IDToken, "").code; code != http.StatusOK {
		t.Fatalf("the refreshed token answers %d", code)
	}

	// A refresh the provider refuses ends in exit 1 naming deployd login.
	refreshed.RefreshToken, refreshed.Expiry = "not-a-refresh-token", time.Now().Add(-time.Minute)
	if err := creds.save(); err != nil {
		t.Fatal(err)
	}
	if msg, code := cliRun(t, "app", "list"); code != 1 || !strings.Contains(msg, "deployd login --server "+env.URL) {
		t.Fatalf("a refused refresh: exit %d: %s", code, msg)
	}
	b.checkConsole()
}

// TestLoginToDemo: deployd login works against deployd demo and its
// built-in identity provider (its CLI client, a loopback redirect), and a
// member's kept sign-in sees only its tenant.
func TestLoginToDemo(t *testing.T) {
	d := runningDemo(t)
	dir := isolatedConfig(t)
	authURL, done, out := startLogin(t, t.Context(), d.URL)
	if u, _ := url.Parse(authURL); u == nil || u.Query().Get("client_id") != idp.CLIClientID {
		t.Fatalf("sign-in URL %s: want the demo's CLI client %s", authURL, idp.CLIClientID)
	}
	// The chooser page, then the pick (as the browser does), following the
	// redirects to the CLI's loopback address.
	ari := demoUser(t, d, "ari")
	resp, err := http.Get(authURL + "&" + idp.UserParam + "=" + url.QueryEscape(ari.Subject))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Signed in") {
		t.Fatalf("the loopback page: %d %s", resp.StatusCode, page)
	}
	if err := <-done; err != nil {
		t.Fatalf("login: %v\n%s", err, out.String())
	}
	if _, mode := readCredentials(t, dir); mode != 0o600 {
		t.Fatalf("credentials mode %v", mode)
	}
	list, code := cliRun(t, "app", "list", "-o", "json")
	var items struct {
		Items []struct{ Metadata struct{ Namespace string } }
	}
	if code != 0 || json.Unmarshal([]byte(list), &items) != nil || len(items.Items) == 0 {
		t.Fatalf("app list as ari: exit %d\n%s", code, list)
	}
	for _, it := range items.Items {
		if it.Metadata.Namespace != "tenant-acme" {
			t.Fatalf("ari's kept sign-in lists an app of %s", it.Metadata.Namespace)
		}
	}
	if sum, code := cliRun(t, "watch", "--summary"); code != 0 || !strings.Contains(sum, "Healthy") {
		t.Fatalf("watch --summary with the kept sign-in: exit %d\n%s", code, sum)
	}
	// The CLI's client redirects to loopback only.
	bad := strings.Replace(authURL, url.QueryEscape("http://127.0.0.1:"), url.QueryEscape("http://evil.example:"), 1)
	resp, err = http.Get(bad + "&" + idp.UserParam + "=" + url.QueryEscape(ari.Subject))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("the CLI's client redirected off loopback: %d", resp.StatusCode)
	}
	if msg, code := cliRun(t, "logout"); code != 0 || !strings.Contains(msg, "Signed out of "+d.URL) {
		t.Fatalf("logout: %d %s", code, msg)
	}
	if msg, code := cliRun(t, "app", "list", "--server", d.URL); code != 1 || !strings.Contains(msg, "not signed in") {
		t.Fatalf("after logout: exit %d: %s", code, msg)
	}
}
