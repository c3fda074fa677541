package idp

import (
	"encoding/json"
	"slices"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// User is a demo identity. It implements mockoidc.User: its ID token
// carries the tenancy claims deployd reads (owner, isAdmin) besides the
// standard profile and email claims.
type User struct {
	Subject  string
	Username string // preferred_username
	Name     string
	Email    string
	// Org is the owner claim: "admin" makes a SuperAdmin.
	Org string
	// OrgAdmin is the isAdmin claim.
	OrgAdmin bool
	// Role says on the sign-in page what the user may do.
	Role string
}

var _ mockoidc.User = User{}

// Users are the demo identities: a SuperAdmin, a member of acme and an
// OrgAdmin of globex.
func Users() []User {
	return []User{
		{Subject: "demo-superadmin", Username: "ada", Name: "Ada Admin", Email: "ada@example.com", Org: "admin", OrgAdmin: true,
			Role: "SuperAdmin: sees the whole fleet and may sync, roll back and restart"},
		{Subject: "demo-acme-member", Username: "ari", Name: "Ari of Acme", Email: "ari@acme.example.com", Org: "acme",
			Role: "Member of acme: sees acme's apps, read-only"},
		{Subject: "demo-globex-admin", Username: "gil", Name: "Gil of Globex", Email: "gil@globex.example.com", Org: "globex", OrgAdmin: true,
			Role: "OrgAdmin of globex: sees globex's apps and its /v1/paas board"},
	}
}

// ID is the subject.
func (u User) ID() string { return u.Subject }

// Userinfo is the userinfo answer for the granted scopes.
func (u User) Userinfo(scope []string) ([]byte, error) {
	info := map[string]any{"sub": u.Subject, "owner": u.Org, "isAdmin": u.OrgAdmin}
	u.addScoped(info, scope)
	return json.Marshal(info)
}

// Claims are the ID token's claims: mockoidc's registered claims and nonce,
// the tenancy claims, and the profile and email claims the scopes grant.
func (u User) Claims(scope []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	raw, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	claims := jwt.MapClaims{}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, err
	}
	claims["owner"], claims["isAdmin"] = u.Org, u.OrgAdmin
	u.addScoped(claims, scope)
	return claims, nil
}

func (u User) addScoped(m map[string]any, scope []string) {
	if slices.Contains(scope, "profile") {
		m["preferred_username"], m["name"] = u.Username, u.Name
	}
	if slices.Contains(scope, "email") {
		m["email"], m["email_verified"] = u.Email, true
	}
	if slices.Contains(scope, "groups") {
		m["groups"] = []string{u.Org}
	}
}
