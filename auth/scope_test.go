package auth

import (
	"errors"
	"testing"
)

func TestScopeFor(t *testing.T) {
	type check struct {
		ns, org string
		sees    bool
	}
	tests := []struct {
		name    string
		p       *Principal
		wantErr error
		key     string
		all     bool
		org     string
		paas    bool
		write   bool
		sees    []check
	}{
		{name: "nil principal", p: nil, wantErr: ErrUnauthenticated},
		{name: "no org", p: &Principal{Subject: "x"}, wantErr: ErrForbidden},
		{name: "no org, org admin claim", p: &Principal{Subject: "x", OrgAdmin: true}, wantErr: ErrForbidden},
		{name: "invalid org", p: &Principal{Subject: "x", Org: "Acme/../x"}, wantErr: ErrForbidden},
		{
			name: "super admin", p: &Principal{Subject: "root", Org: "admin", SuperAdmin: true},
			key: "*", all: true, paas: true, write: true,
			sees: []check{
				{"tenant-acme", "acme", true}, {"hanzo", "", true}, {"tenant-beta", "gamma", true},
			},
		},
		{
			name: "super admin from groups without an org", p: &Principal{Subject: "root", SuperAdmin: true},
			key: "*", all: true, paas: true, write: true,
			sees: []check{{"tenant-acme", "acme", true}},
		},
		{
			name: "member", p: &Principal{Subject: "alice", Org: "acme"},
			key: "org:acme", org: "acme",
			sees: []check{
				{"tenant-acme", "acme", true},
				{"tenant-acme", "", false},      // label missing
				{"tenant-acme", "beta", false},  // label of another org
				{"tenant-beta", "acme", false},  // label forged in another tenant
				{"hanzo", "acme", false},        // platform namespace
				{"tenant-acmex", "acme", false}, // prefix of another name
				{"tenant-acme ", "acme", false}, // not the exact name
				{"tenant-acme", "acme ", false}, // not the exact label
				{"TENANT-ACME", "acme", false},  // case matters
				{"tenant-acme", "ACME", false},  // case matters
				{"", "", false},                 // nothing
				{"tenant-", "", false},          // empty org
				{"tenant-acme", "tenant-acme", false},
			},
		},
		{
			name: "org admin", p: &Principal{Subject: "bob", Org: "beta", OrgAdmin: true},
			key: "org:beta", org: "beta", paas: true,
			sees: []check{
				{"tenant-beta", "beta", true}, {"tenant-beta", "", false}, {"tenant-acme", "acme", false},
				{"tenant-beta.staging", "beta", true}, // its namespace in another cluster
				{"tenant-beta", "acme", false},        // another org's label in its namespace
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ScopeFor(tc.p)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got error %v, want %v", err, tc.wantErr)
				}
				if s != (Scope{}) {
					t.Fatalf("got scope %+v with an error, want the zero scope", s)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got := s.Key(); got != tc.key {
				t.Errorf("Key() = %q, want %q", got, tc.key)
			}
			if got := s.IsAll(); got != tc.all {
				t.Errorf("IsAll() = %v, want %v", got, tc.all)
			}
			if got := s.Org(); got != tc.org {
				t.Errorf("Org() = %q, want %q", got, tc.org)
			}
			if got := s.CanReadPaaS(); got != tc.paas {
				t.Errorf("CanReadPaaS() = %v, want %v", got, tc.paas)
			}
			if got := s.CanWrite(); got != tc.write {
				t.Errorf("CanWrite() = %v, want %v", got, tc.write)
			}
			for _, c := range tc.sees {
				if got := s.Sees(c.ns, c.org); got != c.sees {
					t.Errorf("Sees(%q, %q) = %v, want %v", c.ns, c.org, got, c.sees)
				}
			}
			for _, c := range tc.sees {
				if got, want := s.SeesPaaS(c.ns, c.org), c.sees && tc.paas; got != want {
					t.Errorf("SeesPaaS(%q, %q) = %v, want %v", c.ns, c.org, got, want)
				}
			}
		})
	}
}

func TestZeroScopeSeesNothing(t *testing.T) {
	var s Scope
	if s.Sees("tenant-", "") || s.Sees("", "") || s.IsAll() || s.CanReadPaaS() || s.CanWrite() || s.SeesPaaS("", "") {
		t.Fatal("the zero Scope grants something")
	}
	if got := s.Key(); got != "-" {
		t.Fatalf("Key() = %q, want -", got)
	}
}
