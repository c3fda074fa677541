package auth_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/hydratest"
)

// TestHydraVerify checks ID tokens issued by a real provider: the claims map
// to the Principal and Scope, and a token for another client is refused
// unless that client is an extra audience.
func TestHydraVerify(t *testing.T) {
	h := hydratest.Start(t)
	deployd := h.CreateClient(t, hydratest.ClientOptions{})
	cli := h.CreateClient(t, hydratest.ClientOptions{Public: true})

	newAuth := func(extra ...string) *auth.Authenticator {
		a := auth.New(t.Context(), auth.Config{
			Issuer: h.Issuer, ClientID: deployd.ID, ClientSecret: deployd.Secret,
			PublicURL: "http://127.0.0.1:1", ExtraAudiences: extra,
		}, slog.New(slog.DiscardHandler))
		t.Cleanup(a.Close)
		if st := a.Status(); !st.Enabled {
			t.Fatalf("sign-in disabled against Hydra: %s", st.Reason)
		}
		return a
	}
	a := newAuth()

	bob := hydratest.Identity{Subject: "bob", Claims: map[string]any{
		"preferred_username": "bob", "email": "bob@beta.test", "owner": "beta", "isAdmin": true, "groups": []string{"ops"},
	}}
	p, err := a.Verify(t.Context(), h.IDToken(t, deployd, bob))
	if err != nil {
		t.Fatalf("Verify(Hydra ID token): %v", err)
	}
	if p.Subject != "bob" || p.Username != "bob" || p.Email != "bob@beta.test" || p.Org != "beta" || !p.OrgAdmin || p.SuperAdmin ||
		p.Issuer != h.Issuer || len(p.Groups) != 1 || p.Groups[0] != "ops" {
		t.Fatalf("principal %+v", p)
	}
	sc, err := auth.ScopeFor(p)
	if err != nil || sc.Key() != "org:beta" || !sc.CanReadPaaS() || sc.CanWrite() {
		t.Fatalf("scope %+v, %v", sc, err)
	}

	root := hydratest.Identity{Subject: "root", Claims: map[string]any{"owner": "admin"}}
	p, err = a.Verify(t.Context(), h.IDToken(t, deployd, root))
	if err != nil || !p.SuperAdmin {
		t.Fatalf("super admin: %+v, %v", p, err)
	}

	cliToken := h.IDToken(t, cli, bob)
	if _, err := a.Verify(t.Context(), cliToken); !errors.Is(err, auth.ErrTokenRefused) {
		t.Fatalf("token of another client: got %v, want ErrTokenRefused", err)
	}
	if _, err := newAuth(cli.ID).Verify(t.Context(), cliToken); err != nil {
		t.Fatalf("token of an extra audience: %v", err)
	}
}
