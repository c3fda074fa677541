package release

import (
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

// TestRegistryLatestTag runs against distribution's registry server on
// loopback: the latest tag is the highest clean release, a declared older
// one is stale, and a new push moves the answer on the next refresh (and
// closes the Changes channel).
func TestRegistryLatestTag(t *testing.T) {
	reg := clustertest.StartRegistry(t)
	repo := reg.Host + "/acme/api"
	for _, tag := range []string{"v1.0.0", "v1.2.0", "v1.10.0", "latest", "v2.0.0-rc.1"} {
		clustertest.PushImage(t, repo, tag)
	}
	s := runSource(t, Config{Registry: true, Refresh: 300 * time.Millisecond}, repo)
	waitFor(t, "the first refresh", func() bool { return s.Release(repo, "v1.2.0").Status == "" })

	rel := s.Release(repo, "v1.2.0")
	if rel.LatestTag != "v1.10.0" || !rel.TagsOnly {
		t.Fatalf("got latest %q tagsOnly %v, want v1.10.0 from tags only", rel.LatestTag, rel.TagsOnly)
	}
	d := projection.ComputeDrift(projection.Observed{DeclaredTag: "v1.2.0", RunningTag: "v1.2.0", Release: rel})
	if got := flagKinds(d); !equalKinds(got, []projection.DriftKind{projection.DriftStale}) || d.Severity != projection.SeverityYellow {
		t.Fatalf("v1.2.0 declared: got %+v, want stale (yellow) only: a registry says nothing of releases", d)
	}

	gen, changed := s.Changes()
	clustertest.PushImage(t, repo, "v1.11.0")
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no change announced after v1.11.0 was pushed")
	}
	if got := s.Release(repo, "v1.2.0").LatestTag; got != "v1.11.0" {
		t.Fatalf("after the push: latest %q, want v1.11.0", got)
	}
	if g, _ := s.Changes(); g <= gen {
		t.Errorf("generation: got %d, want past %d", g, gen)
	}
}

// TestRegistryCredentialsFromDockerConfig reads a repository through a
// proxy that demands the Docker config file's credentials.
func TestRegistryCredentialsFromDockerConfig(t *testing.T) {
	reg := clustertest.StartRegistry(t)
	clustertest.PushImage(t, reg.Host+"/acme/web", "v3.1.4")
	// A loopback front that asks for basic auth, then forwards.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "pa55" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		r.URL.Scheme, r.URL.Host, r.RequestURI = "http", reg.Host, ""
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			w.Write(buf[:n])
			if err != nil {
				return
			}
		}
	})}
	go front.Serve(ln)
	t.Cleanup(func() { front.Close() })
	host := ln.Addr().String()

	anon := runSource(t, Config{Registry: true, Refresh: time.Hour}, host+"/acme/web")
	waitFor(t, "the anonymous refresh", func() bool { return anon.Stats().Refreshes >= 1 })
	if got, want := anon.Release(host+"/acme/web", "v3.1.4").Status, "error (registry denied access; check DEPLOY_REGISTRY_AUTH_FILE)"; got != want {
		t.Errorf("anonymous: got status %q, want %q", got, want)
	}

	cfg := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("robot:pa55"))
	if err := os.WriteFile(cfg, []byte(`{"auths":{"http://`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := runSource(t, Config{Registry: true, RegistryAuthFile: cfg, Refresh: time.Hour}, host+"/acme/web")
	waitFor(t, "the authenticated refresh", func() bool { return s.Stats().Refreshes >= 1 })
	if rel := s.Release(host+"/acme/web", "v3.1.4"); rel.Status != "" || rel.LatestTag != "v3.1.4" {
		t.Errorf("with credentials: got status %q latest %q, want answered, v3.1.4", rel.Status, rel.LatestTag)
	}
}

// TestRegistryDownIsAnErrorNotRed: a registry that hangs or refuses
// connections leaves the row "error (…)" with no release flag.
func TestRegistryDownIsAnErrorNotRed(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hang.Close() })
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := refused.Addr().String()
	refused.Close()

	hung := strings.TrimPrefix(hang.URL, "http://") + "/acme/api"
	gone := down + "/acme/api"
	s := runSource(t, Config{Registry: true, Refresh: time.Hour, Timeout: 200 * time.Millisecond}, hung, gone)
	waitFor(t, "both refreshes", func() bool { return s.Stats().Refreshes >= 2 })
	for repo, want := range map[string]string{hung: "error (registry timed out)", gone: "error (registry unreachable)"} {
		rel := s.Release(repo, "v1.0.0")
		if rel.Status != want {
			t.Errorf("%s: got status %q, want %q", repo, rel.Status, want)
		}
		if d := projection.ComputeDrift(projection.Observed{DeclaredTag: "v1.0.0", RunningTag: "v1.0.0", Release: rel}); len(d.Flags) != 0 {
			t.Errorf("%s: got flags %+v, want none", repo, d.Flags)
		}
	}
	if st := s.Stats(); st.Failures != 2 {
		t.Errorf("failures: got %d, want 2", st.Failures)
	}
}
