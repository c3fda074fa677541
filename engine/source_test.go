package engine

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hanzoai/deploy/engine/enginetest"
)

const appDoc = "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: %s}\n"

func TestSourceFetchesOverSmartHTTP(t *testing.T) {
	srv := enginetest.NewServer(t)
	repo := srv.NewRepo(t, "fleet")
	sha1 := repo.Commit(t, "first", map[string]string{"crs/a.yaml": "a: 1\n", "crs/sub/b.yml": "b: 2\n", "other/c.yaml": "c: 3\n"})

	src, err := NewSource(repo.URL, "main", filepath.Join(t.TempDir(), "cache"), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Fetch(t.Context())
	if err != nil || got != sha1 {
		t.Fatalf("got %q, %v; want %s", got, err, sha1)
	}
	files, err := src.Files(got, "crs")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || string(files["crs/sub/b.yml"]) != "b: 2\n" {
		t.Fatalf("files %v, want crs/a.yaml and crs/sub/b.yml", files)
	}

	// An unchanged ref costs one round trip (the ref listing), no fetch.
	before := srv.Requests.Load()
	if got, err := src.Fetch(t.Context()); err != nil || got != sha1 {
		t.Fatalf("refetch: %q, %v", got, err)
	}
	if n := srv.Requests.Load() - before; n != 1 {
		t.Errorf("an unchanged ref took %d requests, want 1", n)
	}

	sha2 := repo.Commit(t, "second", map[string]string{"crs/a.yaml": "a: 2\n", "crs/sub/b.yml": ""})
	if got, err := src.Fetch(t.Context()); err != nil || got != sha2 {
		t.Fatalf("after a commit: %q, %v; want %s", got, err, sha2)
	}
	files, err = src.Files(sha2, "crs")
	if err != nil || len(files) != 1 || string(files["crs/a.yaml"]) != "a: 2\n" {
		t.Fatalf("files %v, %v", files, err)
	}

	// A fetch failure keeps the last good revision and says why.
	bad, _ := NewSource(srv.URL+"/missing.git", "main", filepath.Join(t.TempDir(), "cache2"), nil, "")
	if _, err := bad.Fetch(t.Context()); err == nil || bad.Revision() != "" {
		t.Fatalf("a missing repository: %v, revision %q", err, bad.Revision())
	}
	src2, _ := NewSource(repo.URL, "nope", filepath.Join(t.TempDir(), "cache3"), nil, "")
	var fe *FetchError
	if _, err := src2.Fetch(t.Context()); !errors.As(err, &fe) || !strings.Contains(err.Error(), `ref "nope" is not on the server`) {
		t.Fatalf("a missing ref: %v", err)
	}
	if src.Revision() != sha2 {
		t.Errorf("revision %q, want %s", src.Revision(), sha2)
	}
}

func TestSourceToken(t *testing.T) {
	const token = "s3cr3t-token"
	srv := enginetest.NewServer(t, enginetest.WithBasicAuth("git", token))
	repo := srv.NewRepo(t, "private")
	sha := repo.Commit(t, "first", map[string]string{"crs/a.yaml": "a: 1\n"})

	anon, _ := NewSource(repo.URL, "main", filepath.Join(t.TempDir(), "anon"), nil, "")
	_, err := anon.Fetch(t.Context())
	if err == nil || !strings.Contains(err.Error(), "authentication required") {
		t.Fatalf("anonymous: %v, want authentication required", err)
	}
	wrong, _ := NewSource(repo.URL, "main", filepath.Join(t.TempDir(), "wrong"), []byte("not-"+token+"\n"), "")
	if _, err := wrong.Fetch(t.Context()); err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("wrong token: %v", err)
	}
	src, err := NewSource(repo.URL, "main", filepath.Join(t.TempDir(), "ok"), []byte(token+"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := src.Fetch(t.Context()); err != nil || got != sha {
		t.Fatalf("with the token: %q, %v", got, err)
	}
}

func TestSourceCredentialKinds(t *testing.T) {
	key := []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nnot really\n-----END OPENSSH PRIVATE KEY-----\n")
	if _, err := NewSource("https://git.example.com/r.git", "main", t.TempDir(), key, ""); err == nil || !strings.Contains(err.Error(), "not ssh") {
		t.Errorf("an SSH key for an https URL: %v", err)
	}
	if _, err := NewSource("ssh://git@git.example.com/r.git", "main", t.TempDir(), []byte("token"), ""); err == nil || !strings.Contains(err.Error(), "no SSH private key") {
		t.Errorf("a token for an ssh URL: %v", err)
	}
	if _, err := NewSource("ssh://git@git.example.com/r.git", "main", t.TempDir(), key, ""); err == nil || strings.Contains(err.Error(), "not really") {
		t.Errorf("an unreadable key: %v", err)
	}
	if _, err := NewSource("http://git.example.com/r.git", "main", t.TempDir(), []byte("token"), ""); err == nil {
		t.Error("a token over plain http to a remote host was accepted")
	}
}
