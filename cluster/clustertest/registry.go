package clustertest

import (
	"fmt"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Registry is a real OCI registry (distribution's registry server, built
// by hack/build-tools.sh) on a loopback port, storing under a temporary
// folder. Plain HTTP: go-containerregistry talks HTTP to 127.0.0.1 by
// itself.
type Registry struct {
	// Host is "127.0.0.1:PORT", the registry part of an image reference.
	Host string
	proc *process
}

// StartRegistry starts a registry for the test and stops it at cleanup.
// It skips without the binary, or fails when DEPLOYD_REQUIRE_TOOLS=1.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	bin := binary(t, "registry")
	dir := t.TempDir()
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		host := fmt.Sprintf("127.0.0.1:%d", ports[0])
		cfg := filepath.Join(dir, "config.yml")
		conf := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
			filepath.Join(dir, "data"), host)
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		r := &Registry{Host: host, proc: newProcess("registry", bin, filepath.Join(dir, "registry.log"), []string{"serve", cfg})}
		if err := r.proc.start(); err != nil {
			t.Fatal(err)
		}
		err = poll(deadline, r.proc, r.ready)
		if err == nil {
			t.Cleanup(func() { r.proc.stop(syscall.SIGTERM, 5*time.Second) })
			return r
		}
		r.proc.stop(syscall.SIGKILL, time.Second)
		if r.proc.exitedWithBindError() && attempt < 5 {
			continue
		}
		t.Fatalf("registry not ready: %v\n%s", err, r.proc.tail(20))
	}
}

// ready is true once the registry answers its API base (200, or 401 when
// it asks for credentials).
func (r *Registry) ready() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + r.Host + "/v2/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized
}

// PushImage writes a small random image at repository:tag (repository
// names the registry's host, e.g. the one StartRegistry answers).
func PushImage(t testing.TB, repository, tag string) {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(repository + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}
