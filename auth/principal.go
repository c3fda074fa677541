package auth

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Principal is who a validated token says the caller is. It is built only
// from a token whose signature, issuer, audience, algorithm and expiry were
// checked; nothing a client can set directly (a header, a query value) ever
// contributes to it. Treat it as immutable.
type Principal struct {
	Subject  string
	Username string
	// Name is the token's name claim ("" when it has none).
	Name  string
	Email string
	// Org is the caller's organization ("" when the token names none, or
	// names one that cannot be a namespace suffix).
	Org    string
	Groups []string
	// SuperAdmin: member of the admin organization; sees and acts on the
	// whole fleet.
	SuperAdmin bool
	// OrgAdmin: the token marks the caller admin of its own org.
	OrgAdmin bool
	Issuer   string
	// Expiry is when the credential stops being valid: the token's exp, or
	// earlier when the session cookie carrying it ends first.
	Expiry time.Time
}

// clone returns a deep copy, so a cached Principal is never shared.
func (p *Principal) clone() *Principal {
	if p == nil {
		return nil
	}
	c := *p
	c.Groups = slices.Clone(p.Groups)
	return &c
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p. Only code that validated the token p
// came from (the HTTP authentication middleware) should call it.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalKey is the context key PrincipalFrom reads. A context type that
// keeps the request's Principal in a field of its own answers Value of this
// key with it (a *Principal), so that middleware which puts everything it
// adds to a request into one value needs no second one for the Principal.
// The same rule as WithPrincipal's holds: only code that validated the
// token the Principal came from may do so.
func PrincipalKey() any { return principalKey{} }

// PrincipalFrom returns the Principal stored by WithPrincipal (or under
// PrincipalKey), or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// principalFromClaims applies the claim mapping to a verified token's claims.
func (m ClaimMapping) principalFromClaims(raw []byte, issuer, subject string, expiry time.Time) (*Principal, error) {
	var claims map[string]json.RawMessage
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, err
	}
	p := &Principal{
		Subject: subject,
		Issuer:  issuer,
		Expiry:  expiry,
		Email:   claimString(claims, "email"),
		Name:    claimString(claims, "name"),
		Groups:  claimStrings(claims, m.GroupsClaim),
	}
	for _, k := range []string{"preferred_username", "name", "email", "sub"} {
		if v := claimString(claims, k); v != "" {
			p.Username = v
			break
		}
	}
	if m.OrgGroupPrefix != "" {
		for _, g := range p.Groups {
			if org, ok := strings.CutPrefix(g, m.OrgGroupPrefix); ok && validOrg(org) {
				p.Org = org
				break
			}
		}
		p.SuperAdmin = m.AdminOrg != "" && slices.Contains(p.Groups, m.OrgGroupPrefix+m.AdminOrg)
	} else {
		org := claimString(claims, m.OrgClaim)
		if validOrg(org) {
			p.Org = org
		}
		p.SuperAdmin = m.AdminOrg != "" && org == m.AdminOrg
	}
	p.OrgAdmin = claimBool(claims, m.OrgAdminClaim)
	return p, nil
}

func claimString(claims map[string]json.RawMessage, name string) string {
	var s string
	if raw, ok := claims[name]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// claimStrings reads an array of strings (non-strings skipped) or a single
// string.
func claimStrings(claims map[string]json.RawMessage, name string) []string {
	raw, ok := claims[name]
	if !ok {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil
		}
		return []string{one}
	}
	var many []any
	if json.Unmarshal(raw, &many) != nil {
		return nil
	}
	var out []string
	for _, v := range many {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// claimBool is true for JSON true or the string "true" (any case); anything
// else, including a missing claim, is false.
func claimBool(claims map[string]json.RawMessage, name string) bool {
	raw, ok := claims[name]
	if !ok {
		return false
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && strings.EqualFold(s, "true")
}

// validOrg reports whether org can name a tenant namespace
// (TenantNamespacePrefix+org must be a DNS-1123 label) and a label value.
func validOrg(org string) bool {
	if org == "" || len(TenantNamespacePrefix)+len(org) > 63 {
		return false
	}
	for i := 0; i < len(org); i++ {
		c := org[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (c != '-' || i == 0 || i == len(org)-1) {
			return false
		}
	}
	return true
}
