package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// The tokens `deployd login` keeps, one entry per server, in
// $XDG_CONFIG_HOME/deployd/credentials.json (os.UserConfigDir), mode 0600
// in a folder of mode 0700. Later commands to a server use its entry when
// neither --token nor DEPLOYD_TOKEN is given, refreshing the ID token
// (with the refresh token, at the identity provider) when it has expired,
// and only while the server's settings still name the identity provider
// the entry came from. `deployd login` replaces a server's entry without
// reading it.

// credentialsFile is the file's name in the config folder.
const credentialsFile = "credentials.json"

// refreshBefore is how long before its expiry an ID token is refreshed.
const refreshBefore = 10 * time.Second

type credentials struct {
	// Current is the server of the last login: commands use it when
	// neither --server nor DEPLOYD_SERVER names one.
	Current string                        `json:"current,omitempty"`
	Servers map[string]*serverCredentials `json:"servers"`
}

// serverCredentials are one server's tokens and where to refresh them.
type serverCredentials struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"clientID"`
	// Audiences are the "aud" values an ID token for this server may carry:
	// the CLI's client and the server's own.
	Audiences    []string  `json:"audiences"`
	IDToken      string    `json:"idToken"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry"` // the ID token's
	User         string    `json:"user,omitempty"`
}

func credentialsPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no folder to keep the sign-in in (%v): set XDG_CONFIG_HOME, or pass --token", err)
	}
	return filepath.Join(dir, "deployd", credentialsFile), nil
}

// loadCredentials reads the file; a missing one is empty.
func loadCredentials() (*credentials, error) {
	p, err := credentialsPath()
	if err != nil {
		return nil, err
	}
	c := &credentials{Servers: map[string]*serverCredentials{}}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p, errReason(err))
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s is not deployd's credentials file (%v): remove it and run deployd login again", p, err)
	}
	if c.Servers == nil {
		c.Servers = map[string]*serverCredentials{}
	}
	return c, nil
}

// save writes the file atomically, readable by its owner only.
func (c *credentials) save() error {
	p, err := credentialsPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), credentialsFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// storedToken is the ID token kept for server, refreshed (and saved) when
// it expires within refreshBefore; "" when there is no sign-in for it. A
// refresh first asks the server which issuer it signs in with, and sends
// the refresh token only when that is the entry's.
func storedToken(ctx context.Context, server string, hc *http.Client) (string, error) {
	c, err := loadCredentials()
	if err != nil {
		return "", err
	}
	sc := c.Servers[server]
	if sc == nil {
		return "", nil
	}
	if time.Until(sc.Expiry) > refreshBefore {
		return sc.IDToken, nil
	}
	again := fmt.Sprintf("run deployd login --server %s", server)
	if sc.RefreshToken == "" {
		return "", failed("your sign-in to %s expired at %s and cannot be refreshed: %s", server, sc.Expiry.Local().Format(time.RFC3339), again)
	}
	// The refresh token goes only to the identity provider the server
	// names now: one the server has left may no longer be trusted with it.
	now, err := (&apiClient{server: server, http: hc}).signInSettings(ctx)
	if err != nil {
		return "", failed("refresh the sign-in to %s: %v", server, err)
	}
	if now.Issuer == "" {
		return "", failed("your sign-in to %s expired, and the server names no identity provider now to refresh it at: %s, or pass a token with --token or DEPLOYD_TOKEN", server, again)
	}
	if now.Issuer != sc.Issuer {
		return "", failed("your sign-in to %s expired; it came from the identity provider %s, but the server signs in with %s now, so it is not refreshed: %s", server, sc.Issuer, now.Issuer, again)
	}
	ctx = oidc.ClientContext(ctx, hc)
	provider, err := oidc.NewProvider(ctx, sc.Issuer)
	if err != nil {
		return "", failed("refresh the sign-in to %s: the identity provider %s cannot be reached (%v)", server, sc.Issuer, err)
	}
	cfg := oauth2.Config{ClientID: sc.ClientID, Endpoint: provider.Endpoint()}
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: sc.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return "", failed("your sign-in to %s expired and the identity provider refused to refresh it (%s): %s", server, oauthReason(err), again)
	}
	idt, exp, err := verifyIDToken(ctx, provider, sc.Audiences, tok, "")
	if err != nil {
		return "", failed("refresh the sign-in to %s: %v; %s", server, err, again)
	}
	sc.IDToken, sc.Expiry = idt, exp
	if tok.RefreshToken != "" {
		sc.RefreshToken = tok.RefreshToken // providers may rotate it
	}
	if err := c.save(); err != nil {
		return "", fmt.Errorf("keep the refreshed sign-in: %w", err)
	}
	return idt, nil
}

// verifyIDToken checks the ID token of a token answer: signed by the
// provider, unexpired, for one of audiences (the CLI's client or the
// server's: a provider may mint the CLI's tokens for the server's client),
// and with the nonce sent, when one was. It answers it with its expiry.
func verifyIDToken(ctx context.Context, provider *oidc.Provider, audiences []string, tok *oauth2.Token, nonce string) (string, time.Time, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", time.Time{}, errors.New("the identity provider answered without an ID token")
	}
	idt, err := provider.Verifier(&oidc.Config{SkipClientIDCheck: true}).Verify(ctx, raw)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("the identity provider's ID token does not verify: %v", err)
	}
	if !slices.ContainsFunc(idt.Audience, func(a string) bool { return a != "" && slices.Contains(audiences, a) }) {
		return "", time.Time{}, fmt.Errorf("the identity provider's ID token is for %v, not for deployd (%v)", idt.Audience, audiences)
	}
	if nonce != "" && idt.Nonce != nonce {
		return "", time.Time{}, errors.New("the ID token answers another sign-in (its nonce differs)")
	}
	return raw, idt.Expiry, nil
}

// oauthReason is an OAuth error's code and description, without the
// response body (which may echo what was sent).
func oauthReason(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			if re.ErrorDescription != "" {
				return re.ErrorCode + ": " + re.ErrorDescription
			}
			return re.ErrorCode
		}
		if re.Response != nil {
			return re.Response.Status
		}
	}
	return err.Error()
}
