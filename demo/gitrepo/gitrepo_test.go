package gitrepo

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needGit skips without the system git, unless the run requires the tools.
func needGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("DEPLOYD_REQUIRE_TOOLS") == "1" {
			t.Fatal("git is not installed (DEPLOYD_REQUIRE_TOOLS=1): make packages installs it")
		}
		t.Skip("git is not installed")
	}
}

func TestRefusesAnAddressOffLoopback(t *testing.T) {
	needGit(t) // Start answers ErrNoGit before it looks at the address
	_, err := Start(t.Context(), Options{Listen: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Start on 0.0.0.0: %v, want a refusal naming loopback", err)
	}
}

// A clone gets the first commit's files; a push lands and is reported;
// Close removes the folder.
func TestCloneAndPush(t *testing.T) {
	needGit(t)
	pushed := make(chan struct{}, 4)
	r, err := Start(t.Context(), Options{
		Listen: "127.0.0.1:0", Files: map[string][]byte{"apps/a.yaml": []byte("a: 1\n")},
		AuthorName: "Demo", AuthorEmail: "demo@example.com", OnPush: func() { pushed <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	work := t.TempDir()
	git(work, "clone", "-q", r.URL, "c")
	clone := filepath.Join(work, "c")
	if b, err := os.ReadFile(filepath.Join(clone, "apps", "a.yaml")); err != nil || string(b) != "a: 1\n" {
		t.Fatalf("cloned apps/a.yaml: %q %v", b, err)
	}
	if got := git(clone, "log", "-1", "--format=%an <%ae>"); got != "Demo <demo@example.com>" {
		t.Fatalf("first commit by %q", got)
	}
	os.WriteFile(filepath.Join(clone, "apps", "a.yaml"), []byte("a: 2\n"), 0o644)
	git(clone, "commit", "-qam", "two")
	// A request naming another site as its Host (a DNS rebinding) is
	// refused before git sees it; the push over 127.0.0.1 lands.
	req, _ := http.NewRequest(http.MethodGet, r.URL+"/info/refs?service=git-receive-pack", nil)
	req.Host = "evil.example:8081"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(msg), "only loopback hosts") {
		t.Errorf("a push's first request with Host evil.example:8081: %d %s", resp.StatusCode, msg)
	}
	git(clone, "push", "-q", "origin", Branch)
	<-pushed
	if got, want := git(clone, "ls-remote", r.URL, "refs/heads/"+Branch), git(clone, "rev-parse", "HEAD"); !strings.HasPrefix(got, want) {
		t.Fatalf("the server's %s is %q, want %s", Branch, got, want)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Fatalf("%s is still there after Close (%v)", r.Dir, err)
	}
}
