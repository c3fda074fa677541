package auth

import (
	"errors"
	"strings"
)

// TenantNamespacePrefix starts the namespace of every tenant: org "acme"
// lives in "tenant-acme".
const TenantNamespacePrefix = "tenant-"

var (
	// ErrUnauthenticated: no principal (no token, or none that validated).
	// Answered 401.
	ErrUnauthenticated = errors.New("sign in required")
	// ErrForbidden: a validated principal that belongs to no organization.
	// Answered 403.
	ErrForbidden = errors.New("the account belongs to no organization")
)

// Scope is what a principal may see and do. It is derived in one place
// (ScopeFor) and used by every route and stream. The zero Scope sees nothing
// and may do nothing.
type Scope struct {
	all      bool
	org      string
	orgAdmin bool
}

// AllScope is the SuperAdmin's scope: the whole fleet.
func AllScope() Scope { return Scope{all: true} }

// ScopeFor is the tenancy rule of deployd, as a pure function:
//   - nil principal: ErrUnauthenticated;
//   - SuperAdmin: everything;
//   - a principal with a valid org: Apps in TenantNamespacePrefix+org that
//     carry the label hanzo.ai/org=<org>; an OrgAdmin additionally reads the
//     /v1/paas board of its own namespace;
//   - any other principal: ErrForbidden.
func ScopeFor(p *Principal) (Scope, error) {
	switch {
	case p == nil:
		return Scope{}, ErrUnauthenticated
	case p.SuperAdmin:
		return Scope{all: true}, nil
	case !validOrg(p.Org):
		return Scope{}, ErrForbidden
	default:
		return Scope{org: p.Org, orgAdmin: p.OrgAdmin}, nil
	}
}

// Sees reports whether an App in namespace, labelled hanzo.ai/org=orgLabel,
// is visible. Both must match for a tenant.
func (s Scope) Sees(namespace, orgLabel string) bool {
	if s.all {
		return true
	}
	return s.org != "" && orgLabel == s.org && s.ownNamespace(namespace)
}

// ownNamespace reports whether namespace is the tenant's in some cluster:
// TenantNamespacePrefix+org, or that qualified with a cluster's name
// (projection's naming rule: "tenant-acme.staging").
func (s Scope) ownNamespace(namespace string) bool {
	ns, _, _ := strings.Cut(namespace, ".")
	org, ok := strings.CutPrefix(ns, TenantNamespacePrefix)
	return ok && org == s.org
}

// IsAll reports whether the scope is the whole fleet (a SuperAdmin).
func (s Scope) IsAll() bool { return s.all }

// Org is the tenant's organization ("" for the whole fleet or the zero Scope).
func (s Scope) Org() string { return s.org }

// Namespace is the tenant's namespace in the first cluster ("" for the
// whole fleet or the zero Scope); in another cluster it is qualified with
// the cluster's name.
func (s Scope) Namespace() string {
	if s.org == "" {
		return ""
	}
	return TenantNamespacePrefix + s.org
}

// Key is a short stable string naming what the scope sees, for cache keys:
// "*" for the whole fleet, "org:<org>" for a tenant, "-" for the zero Scope.
// A member and an OrgAdmin of one org share a key: they see the same Apps.
func (s Scope) Key() string {
	switch {
	case s.all:
		return "*"
	case s.org != "":
		return "org:" + s.org
	default:
		return "-"
	}
}

// CanReadPaaS reports whether the /v1/paas board is readable: a SuperAdmin
// (whole fleet) or an OrgAdmin (its own Apps only, see SeesPaaS).
func (s Scope) CanReadPaaS() bool { return s.all || (s.orgAdmin && s.org != "") }

// SeesPaaS reports whether a /v1/paas row of an App in namespace,
// labelled hanzo.ai/org=orgLabel, is visible: the board is readable
// (CanReadPaaS) and the App visible by the one rule (Sees), in every
// cluster.
func (s Scope) SeesPaaS(namespace, orgLabel string) bool {
	return s.CanReadPaaS() && s.Sees(namespace, orgLabel)
}

// CanWrite reports whether writes (sync, rollback, reconcile, paas deploy)
// are allowed: SuperAdmin only.
func (s Scope) CanWrite() bool { return s.all }
