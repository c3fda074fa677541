package auth

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
)

func TestSafeReturnPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/", "/"},
		{"/applications", "/applications"},
		{"/applications/web?view=tree&x=1#node", "/applications/web?view=tree&x=1#node"},
		{"/a%2Fb", "/a%2Fb"},
		{"/a/./b/../c", "/a/./b/../c"},
		{"/?returnTo=//evil", "/?returnTo=//evil"},
		{"/#//evil", "/#//evil"},
		{"", "/"},
		{"//evil.com", "/"},
		{"//evil.com/path", "/"},
		{"///evil.com", "/"},
		{`/\evil.com`, "/"},
		{`\\evil.com`, "/"},
		{`/a\b`, "/"},
		{"https://evil.com", "/"},
		{"http:/evil.com", "/"},
		{"javascript:alert(1)", "/"},
		{"JavaScript:alert(1)", "/"},
		{"data:text/html,<x>", "/"},
		{"evil.com", "/"},
		{"applications", "/"},
		{"?x=1", "/"},
		{"#x", "/"},
		{"/\t/evil.com", "/"},
		{"/\n/evil.com", "/"},
		{"/a\x00b", "/"},
		{"/a\x7fb", "/"},
		{"/a b", "/"},
		{"/a\u00a0b", "/"},
		{"/a\u202eb", "/"},
		{"/a\u200bb", "/"},
		{"/\xff", "/"},
		{"/%zz", "/"},
		{"/" + strings.Repeat("a", 3000), "/"},
	}
	for _, tc := range tests {
		if got := SafeReturnPath(tc.in); got != tc.want {
			t.Errorf("SafeReturnPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzSafeReturnPath(f *testing.F) {
	for _, s := range []string{
		"/", "/apps?x=1#y", "//evil", `/\evil`, "https://evil", "javascript:x", "/a\tb", "/%2F%2Fevil",
		"/.//evil", "/\u3000", "", "\x00", "/:x", "/a:b", "/@evil", "/?//evil",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := SafeReturnPath(in)
		if out != "/" && out != in {
			t.Fatalf("SafeReturnPath(%q) = %q: neither the input nor /", in, out)
		}
		if !strings.HasPrefix(out, "/") || strings.HasPrefix(out, "//") || strings.HasPrefix(out, `/\`) {
			t.Fatalf("SafeReturnPath(%q) = %q: not a single-slash absolute path", in, out)
		}
		if strings.ContainsRune(out, '\\') {
			t.Fatalf("SafeReturnPath(%q) = %q: contains a backslash", in, out)
		}
		for _, r := range out {
			if unicode.IsControl(r) || unicode.IsSpace(r) {
				t.Fatalf("SafeReturnPath(%q) = %q: contains %U", in, out, r)
			}
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("SafeReturnPath(%q) = %q: does not parse: %v", in, out, err)
		}
		if u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
			t.Fatalf("SafeReturnPath(%q) = %q: has scheme %q host %q", in, out, u.Scheme, u.Host)
		}
		// Resolved against this site, it stays on this site.
		base, _ := url.Parse("https://deploy.example.com/v1/deploy/callback")
		if r := base.ResolveReference(u); r.Host != "deploy.example.com" || r.Scheme != "https" {
			t.Fatalf("SafeReturnPath(%q) = %q resolves to %s", in, out, r)
		}
	})
}

func TestReturnPathFromURL(t *testing.T) {
	const origin = "https://deploy.example.com"
	for _, tc := range []struct{ in, want string }{
		{"https://deploy.example.com/applications/web?view=tree", "/applications/web?view=tree"},
		{"https://DEPLOY.example.com:443/applications", "/applications"},
		{"https://deploy.example.com", "/"},
		{"/applications/web", "/applications/web"},
		{"https://evil.example/applications", "/"},
		{"http://deploy.example.com/applications", "/"},
		{"https://deploy.example.com.evil/x", "/"},
		{"https://user@deploy.example.com/x", "/"},
		{"https://deploy.example.com//evil", "/"},
		{"https://deploy.example.com/a#b", "/a#b"},
		{"//evil/x", "/"},
		{"javascript:alert(1)", "/"},
		{"", "/"},
	} {
		if got := ReturnPathFromURL(tc.in, origin); got != tc.want {
			t.Errorf("ReturnPathFromURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzReturnPathFromURL(f *testing.F) {
	for _, s := range []string{
		"https://deploy.example.com/applications?x=1", "https://evil/x", "/a", "//evil", "https://deploy.example.com//evil",
		"https://deploy.example.com/%2F%2Fevil", "https://deploy.example.com/\\evil", "https://deploy.example.com@evil/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := ReturnPathFromURL(in, "https://deploy.example.com")
		if SafeReturnPath(out) != out {
			t.Fatalf("ReturnPathFromURL(%q) = %q, which is not a safe return path", in, out)
		}
		base, _ := url.Parse("https://deploy.example.com/auth/callback")
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("ReturnPathFromURL(%q) = %q: does not parse: %v", in, out, err)
		}
		if r := base.ResolveReference(u); r.Host != "deploy.example.com" || r.Scheme != "https" {
			t.Fatalf("ReturnPathFromURL(%q) = %q resolves to %s", in, out, r)
		}
	})
}
