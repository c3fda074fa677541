package auth

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPrincipalFromClaims(t *testing.T) {
	exp := time.Unix(1700000000, 0)
	def := Config{}.withDefaults().Claims
	groups := def
	groups.OrgGroupPrefix = "org:"
	custom := ClaimMapping{OrgClaim: "tenant", AdminOrg: "ops", OrgAdminClaim: "tenant_admin", GroupsClaim: "roles"}

	tests := []struct {
		name   string
		m      ClaimMapping
		claims string
		want   Principal
	}{
		{
			name: "member", m: def,
			claims: `{"sub":"u1","preferred_username":"alice","name":"Alice A","email":"a@x","owner":"acme","isAdmin":false,"groups":["a","b"]}`,
			want:   Principal{Subject: "u1", Username: "alice", Name: "Alice A", Email: "a@x", Org: "acme", Groups: []string{"a", "b"}},
		},
		{
			name:   "username falls back to name",
			m:      def,
			claims: `{"sub":"u1","name":"Alice A","email":"a@x"}`,
			want:   Principal{Subject: "u1", Username: "Alice A", Name: "Alice A", Email: "a@x"},
		},
		{
			name: "username falls back to email", m: def,
			claims: `{"sub":"u1","email":"a@x"}`,
			want:   Principal{Subject: "u1", Username: "a@x", Email: "a@x"},
		},
		{
			name: "username falls back to sub", m: def,
			claims: `{"sub":"u1"}`,
			want:   Principal{Subject: "u1", Username: "u1"},
		},
		{
			name: "super admin", m: def,
			claims: `{"sub":"r","owner":"admin"}`,
			want:   Principal{Subject: "r", Username: "r", Org: "admin", SuperAdmin: true},
		},
		{
			name: "org admin as a string", m: def,
			claims: `{"sub":"b","owner":"beta","isAdmin":"True"}`,
			want:   Principal{Subject: "b", Username: "b", Org: "beta", OrgAdmin: true},
		},
		{
			name: "org admin claim of another type is false", m: def,
			claims: `{"sub":"b","owner":"beta","isAdmin":1}`,
			want:   Principal{Subject: "b", Username: "b", Org: "beta"},
		},
		{
			name: "invalid org is no org", m: def,
			claims: `{"sub":"b","owner":"Beta Corp"}`,
			want:   Principal{Subject: "b", Username: "b"},
		},
		{
			name: "org of the wrong type is no org", m: def,
			claims: `{"sub":"b","owner":["acme"]}`,
			want:   Principal{Subject: "b", Username: "b"},
		},
		{
			name: "single group string", m: def,
			claims: `{"sub":"b","groups":"dev"}`,
			want:   Principal{Subject: "b", Username: "b", Groups: []string{"dev"}},
		},
		{
			name: "groups with non-strings", m: def,
			claims: `{"sub":"b","groups":["dev",3,null,"ops"]}`,
			want:   Principal{Subject: "b", Username: "b", Groups: []string{"dev", "ops"}},
		},
		{
			name: "org from groups", m: groups,
			claims: `{"sub":"c","owner":"ignored","groups":["team:x","org:acme","org:beta"]}`,
			want:   Principal{Subject: "c", Username: "c", Org: "acme", Groups: []string{"team:x", "org:acme", "org:beta"}},
		},
		{
			name: "super admin from groups", m: groups,
			claims: `{"sub":"c","groups":["org:acme","org:admin"]}`,
			want:   Principal{Subject: "c", Username: "c", Org: "acme", SuperAdmin: true, Groups: []string{"org:acme", "org:admin"}},
		},
		{
			name: "groups mode ignores the org claim for super admin", m: groups,
			claims: `{"sub":"c","owner":"admin","groups":["org:acme"]}`,
			want:   Principal{Subject: "c", Username: "c", Org: "acme", Groups: []string{"org:acme"}},
		},
		{
			name: "groups mode skips invalid org groups", m: groups,
			claims: `{"sub":"c","groups":["org:","org:Bad","org:good"]}`,
			want:   Principal{Subject: "c", Username: "c", Org: "good", Groups: []string{"org:", "org:Bad", "org:good"}},
		},
		{
			name: "custom claim names", m: custom,
			claims: `{"sub":"d","tenant":"ops","tenant_admin":true,"roles":["r"]}`,
			want:   Principal{Subject: "d", Username: "d", Org: "ops", SuperAdmin: true, OrgAdmin: true, Groups: []string{"r"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.m.principalFromClaims([]byte(tc.claims), "https://iss", tc.want.Subject, exp)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Issuer, tc.want.Expiry = "https://iss", exp
			if diff := cmp.Diff(&tc.want, p); diff != "" {
				t.Fatalf("principal (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrincipalContext(t *testing.T) {
	if p := PrincipalFrom(context.Background()); p != nil {
		t.Fatalf("got %+v from an empty context, want nil", p)
	}
	want := &Principal{Subject: "a"}
	if got := PrincipalFrom(WithPrincipal(context.Background(), want)); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestValidOrg(t *testing.T) {
	for org, want := range map[string]bool{
		"acme": true, "a": true, "a-b": true, "a1": true, "1a": true,
		"": false, "-a": false, "a-": false, "A": false, "a_b": false, "a.b": false, "a b": false,
		"a/b": false, "é": false,
		"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcd":  true,  // 56: tenant-<org> is 63
		"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcde": false, // 57
	} {
		if got := validOrg(org); got != want {
			t.Errorf("validOrg(%q) = %v, want %v", org, got, want)
		}
	}
}

// principalCarrier keeps a Principal in a field of its own.
type principalCarrier struct {
	context.Context
	p *Principal
}

func (c principalCarrier) Value(key any) any {
	if key == PrincipalKey() {
		return c.p
	}
	return c.Context.Value(key)
}

func TestPrincipalKey(t *testing.T) {
	want := &Principal{Subject: "a"}
	ctx, cancel := context.WithCancel(principalCarrier{Context: context.Background(), p: want})
	defer cancel()
	if got := PrincipalFrom(ctx); got != want {
		t.Fatalf("got %+v from a context carrying the Principal under PrincipalKey, want %+v", got, want)
	}
	if PrincipalKey() == any(struct{}{}) {
		t.Fatal("PrincipalKey is an empty struct any package could spell")
	}
}
