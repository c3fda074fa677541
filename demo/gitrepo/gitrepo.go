// Package gitrepo is the demo's manifest repository: a bare git repository
// in a temporary folder, holding the files it starts with in one commit,
// served over git's smart HTTP protocol by the system git (`git
// http-backend`, as CGI) on a loopback address, with push enabled and no
// credentials. A push is reported to OnPush, as a forge's webhook would.
//
// It is for `deployd demo` only: anyone on the machine can push to it.
// Close stops the server and removes the folder.
package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hanzoai/deploy/auth"
)

// Name is the repository's name in its URL.
const Name = "fleet.git"

// Branch is the branch the first commit is on.
const Branch = "main"

// ErrNoGit is returned when the system git is not installed.
var ErrNoGit = errors.New("git is not installed (the demo's repository is served by `git http-backend`)")

// Options configure a repository.
type Options struct {
	// Listen is the loopback host:port to serve on (port 0: any free one).
	Listen string
	// Files are the first commit's files, by slash-separated path.
	Files map[string][]byte
	// AuthorName and AuthorEmail sign the first commit.
	AuthorName, AuthorEmail string
	// Message is the first commit's message.
	Message string
	// OnPush, when set, is called after each push the server accepted a
	// request for (in its own goroutine).
	OnPush func()
	Log    *slog.Logger
}

// Repo is a served repository.
type Repo struct {
	// URL is the clone URL.
	URL string
	// Dir is the temporary folder: the bare repository is under it, and a
	// caller may keep other files there (they are removed with it).
	Dir string

	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	once sync.Once
}

// Start creates the repository and serves it.
func Start(ctx context.Context, o Options) (*Repo, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, ErrNoGit
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Message == "" {
		o.Message = "the first commit"
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", o.Listen, err)
	}
	if !auth.IsLoopbackHost(host) {
		return nil, fmt.Errorf("%q: the demo's repository is served on loopback only (anyone who reaches it can push)", o.Listen)
	}
	dir, err := os.MkdirTemp("", "deployd-demo-git-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Repo, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	root := filepath.Join(dir, "repos")
	if err := initRepo(ctx, gitPath, root, o); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fail(fmt.Errorf("listen on %s: %w", o.Listen, err))
	}
	r := &Repo{URL: "http://" + ln.Addr().String() + "/" + Name, Dir: dir, ln: ln, done: make(chan struct{})}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
		// git's own messages go to the log, not the client's terminal.
		Stderr: logWriter{o.Log},
	}
	r.srv = &http.Server{
		// A page a DNS rebinding points at this port names its own Host:
		// refused, so no web page can push what the demo's engine applies.
		Handler:           auth.LoopbackHostOnly(pushHook(backend, o.OnPush)),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(r.done)
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Log.Warn("the demo's git server stopped", "err", err)
		}
	}()
	return r, nil
}

// Close stops the server and removes the folder. Idempotent.
func (r *Repo) Close() error {
	var err error
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(ctx)
		<-r.done
		err = os.RemoveAll(r.Dir)
	})
	return err
}

// initRepo makes the bare repository under root with one commit of the
// files on Branch.
func initRepo(ctx context.Context, gitPath, root string, o Options) error {
	bare := filepath.Join(root, Name)
	work := filepath.Join(filepath.Dir(root), "first-commit")
	defer os.RemoveAll(work)
	names := make([]string, 0, len(o.Files))
	for name := range o.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
			return fmt.Errorf("file %q: want a relative path", name)
		}
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, o.Files[name], 0o644); err != nil {
			return err
		}
	}
	env := append(os.Environ(),
		"GIT_AUTHOR_NAME="+o.AuthorName, "GIT_AUTHOR_EMAIL="+o.AuthorEmail,
		"GIT_COMMITTER_NAME="+o.AuthorName, "GIT_COMMITTER_EMAIL="+o.AuthorEmail,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	steps := [][]string{
		{"init", "-q", "--bare", "-b", Branch, bare},
		{"-C", bare, "config", "http.receivepack", "true"},
		{"init", "-q", "-b", Branch, work},
		{"-C", work, "add", "-A"},
		{"-C", work, "commit", "-q", "--allow-empty", "-m", o.Message},
		{"-C", work, "push", "-q", bare, Branch},
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, gitPath, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// pushHook calls onPush after each receive-pack request (a push).
func pushHook(next http.Handler, onPush func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		next.ServeHTTP(w, req)
		if onPush != nil && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") {
			go onPush()
		}
	})
}

// logWriter writes git's standard error to the log, a line at a time.
type logWriter struct{ log *slog.Logger }

func (l logWriter) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimSpace(string(p)), "\n") {
		if line != "" {
			l.log.Info("git http-backend", "msg", line)
		}
	}
	return len(p), nil
}
