package enginetest

import (
	"bytes"
	"crypto/subtle"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Server is a git smart-HTTP server for bare repositories under Root.
type Server struct {
	URL  string // http://127.0.0.1:port
	Root string

	user, token string
	gate        atomic.Pointer[chan struct{}]
	down        atomic.Bool
	// Requests counts the requests served (every git round trip).
	Requests atomic.Int64
}

// Option configures a Server.
type Option func(*Server)

// WithBasicAuth makes the server answer 401 unless a request carries this
// user and token as Basic auth.
func WithBasicAuth(user, token string) Option {
	return func(s *Server) { s.user, s.token = user, token }
}

// NewServer starts a server on a loopback port; t.Cleanup stops it.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	execPath := strings.TrimSpace(run(t, "", "git", "--exec-path"))
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git-http-backend: %v (install git)", err)
	}
	s := &Server{Root: t.TempDir()}
	for _, o := range opts {
		o(s)
	}
	h := &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		if s.down.Load() {
			http.Error(w, "the git server is down", http.StatusServiceUnavailable)
			return
		}
		if g := s.gate.Load(); g != nil {
			select {
			case <-*g:
			case <-r.Context().Done():
				return
			}
		}
		if s.token != "" {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(s.token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Hold makes every request wait until the returned release is called (or
// the test ends), so a test can keep a fetch in flight.
func (s *Server) Hold(t testing.TB) (release func()) {
	g := make(chan struct{})
	s.gate.Store(&g)
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.gate.Store(nil)
			close(g)
		})
	}
	t.Cleanup(release)
	return release
}

// Down makes every request fail with 503 until the returned restore is
// called (or the test ends), as a git host in an outage does.
func (s *Server) Down(t testing.TB) (restore func()) {
	s.down.Store(true)
	restore = func() { s.down.Store(false) }
	t.Cleanup(restore)
	return restore
}

// Repo is a bare repository on the server and a working clone to commit
// from.
type Repo struct {
	URL  string // the clone URL
	Bare string // the bare repository's folder
	Work string // the working clone's folder
	srv  *Server
}

// NewRepo creates an empty bare repository name.git whose default branch is
// main, with pushes enabled, and a working clone of it.
func (s *Server) NewRepo(t testing.TB, name string) *Repo {
	t.Helper()
	bare := filepath.Join(s.Root, name+".git")
	run(t, "", "git", "init", "--quiet", "--bare", "--initial-branch=main", bare)
	run(t, bare, "git", "config", "http.receivepack", "true")
	r := &Repo{URL: s.URL + "/" + name + ".git", Bare: bare, Work: filepath.Join(t.TempDir(), name), srv: s}
	run(t, "", "git", "init", "--quiet", "--initial-branch=main", r.Work)
	run(t, r.Work, "git", "remote", "add", "origin", r.authURL())
	return r
}

func (r *Repo) authURL() string {
	if r.srv.token == "" {
		return r.URL
	}
	return strings.Replace(r.URL, "http://", "http://"+r.srv.user+":"+r.srv.token+"@", 1)
}

// Commit writes files (path → content; an empty content removes the file)
// in the working clone, commits them with message, pushes the commit to
// main over HTTP, and returns its SHA.
func (r *Repo) Commit(t testing.TB, message string, files map[string]string) string {
	t.Helper()
	return r.commit(t, message, files, "origin")
}

// CommitBehind is Commit pushed straight into the bare repository, not
// through the server: it works while the server is held or down.
func (r *Repo) CommitBehind(t testing.TB, message string, files map[string]string) string {
	t.Helper()
	return r.commit(t, message, files, r.Bare)
}

func (r *Repo) commit(t testing.TB, message string, files map[string]string, remote string) string {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(r.Work, filepath.FromSlash(p))
		if content == "" {
			if err := os.Remove(full); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, r.Work, "git", "add", "--all")
	run(t, r.Work, "git", "commit", "--quiet", "--allow-empty", "-m", message)
	run(t, r.Work, "git", "push", "--quiet", remote, "HEAD:refs/heads/main")
	return strings.TrimSpace(run(t, r.Work, "git", "rev-parse", "HEAD"))
}

// Head is the SHA main points at on the server.
func (r *Repo) Head(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(run(t, r.Bare, "git", "rev-parse", "refs/heads/main"))
}

func run(t testing.TB, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir(), "GIT_TERMINAL_PROMPT=0")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}
