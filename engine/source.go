package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// maxFileSize bounds one file read from the repository.
const maxFileSize = 8 << 20

// Source fetches one ref of one repository into a bare repository in a
// cache folder. It is used by one run at a time. A failed fetch leaves the
// last good revision in place.
type Source struct {
	repo, ref string
	dir       string
	auth      transport.AuthMethod

	mu   sync.Mutex
	good string // SHA of the last good fetch
}

// NewSource checks the URL and the credentials (an SSH key is a PEM block,
// anything else is an HTTPS token) without contacting the server.
func NewSource(repo, ref, cacheDir string, secret []byte, user string) (*Source, error) {
	u, err := parseRepo(repo, len(secret) > 0)
	if err != nil {
		return nil, err
	}
	s := &Source{repo: repo, ref: ref, dir: cacheDir}
	if len(bytes.TrimSpace(secret)) > 0 {
		if user == "" {
			user = "git"
		}
		if bytes.Contains(secret, []byte("-----BEGIN ")) {
			if u.Scheme != "ssh" {
				return nil, fmt.Errorf("the auth file holds an SSH key but the repo URL is not ssh")
			}
			keys, err := gitssh.NewPublicKeys(user, secret, "")
			if err != nil {
				return nil, fmt.Errorf("the auth file's SSH key cannot be read (is it a PEM private key without a passphrase?)")
			}
			s.auth = keys
		} else {
			if u.Scheme == "ssh" {
				return nil, fmt.Errorf("the repo URL is ssh but the auth file holds no SSH private key")
			}
			s.auth = &githttp.BasicAuth{Username: user, Password: string(bytes.TrimSpace(secret))}
		}
	}
	return s, nil
}

// Revision is the SHA of the last good fetch, "" before one.
func (s *Source) Revision() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.good
}

// FetchError is a fetch that failed; its text is safe for a client (it
// never holds a credential).
type FetchError struct{ Reason string }

func (e *FetchError) Error() string { return "fetch " + e.Reason }

// Fetch resolves the ref on the server and fetches its commit (depth 1)
// unless it is already in the cache. It returns the commit SHA.
func (s *Source) Fetch(ctx context.Context) (string, error) {
	sha, err := s.fetch(ctx)
	if err != nil {
		var fe *FetchError
		if !errors.As(err, &fe) {
			err = &FetchError{Reason: fmt.Sprintf("%s %s: %s", s.display(), s.ref, safeGitError(err, s.auth))}
		}
		return "", err
	}
	s.mu.Lock()
	s.good = sha
	s.mu.Unlock()
	return sha, nil
}

func (s *Source) display() string {
	return s.repo // parseRepo refused URLs with credentials in them
}

func (s *Source) open() (*git.Repository, error) { return openCache(s.dir, s.repo) }

// openCache opens (or creates) a bare cache repository at dir with origin
// at repo.
func openCache(dir, repo string) (*git.Repository, error) {
	r, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("cache folder: %w", err)
		}
		r, err = git.PlainInit(dir, true)
	}
	if err != nil {
		return nil, err
	}
	if _, err := r.Remote("origin"); errors.Is(err, git.ErrRemoteNotFound) {
		_, err = r.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{repo}})
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return r, nil
}

// fetchedRef holds the last commit fetched into the cache.
const fetchedRef = plumbing.ReferenceName("refs/deployd/fetched")

// Cached is the last good commit: this process's last good fetch, else the
// commit a previous process left in the cache folder; "" when there is
// none. A run uses it while the server cannot be reached.
func (s *Source) Cached() string {
	if sha := s.Revision(); sha != "" {
		return sha
	}
	r, err := git.PlainOpen(s.dir)
	if err != nil {
		return ""
	}
	ref, err := r.Reference(fetchedRef, true)
	if err != nil {
		return ""
	}
	sha, err := commitOf(r, ref.Hash())
	if err != nil {
		return ""
	}
	return sha
}

func (s *Source) fetch(ctx context.Context) (string, error) {
	r, err := s.open()
	if err != nil {
		// A cache that cannot be opened is rebuilt.
		if rmErr := os.RemoveAll(s.dir); rmErr != nil {
			return "", err
		}
		if r, err = s.open(); err != nil {
			return "", err
		}
	}
	remote, err := r.Remote("origin")
	if err != nil {
		return "", err
	}
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: s.auth})
	if err != nil {
		return "", err
	}
	name, hash, ok := pickRef(refs, s.ref)
	if !ok {
		return "", &FetchError{Reason: fmt.Sprintf("%s: ref %q is not on the server (no branch, tag or ref of that name)", s.display(), s.ref)}
	}
	if sha, err := commitOf(r, hash); err == nil {
		_ = r.Storer.SetReference(plumbing.NewHashReference(fetchedRef, plumbing.NewHash(sha)))
		return sha, nil // already here: nothing to fetch
	}
	opts := &git.FetchOptions{
		RefSpecs: []gitconfig.RefSpec{gitconfig.RefSpec("+" + name.String() + ":" + fetchedRef.String())},
		Depth:    1,
		Auth:     s.auth,
		Tags:     git.NoTags,
		Force:    true,
	}
	err = remote.FetchContext(ctx, opts)
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		return commitOf(r, hash)
	}
	if ctx.Err() != nil {
		return "", err
	}
	// A shallow cache go-git cannot extend is fetched afresh once, into a
	// folder beside it that replaces it only when that fetch succeeded: a
	// failed fetch never empties the cache.
	fresh := s.dir + ".fresh"
	if err := os.RemoveAll(fresh); err != nil {
		return "", err
	}
	fr, ferr := openCache(fresh, s.repo)
	if ferr != nil {
		return "", err
	}
	fremote, _ := fr.Remote("origin")
	if ferr := fremote.FetchContext(ctx, opts); ferr != nil && !errors.Is(ferr, git.NoErrAlreadyUpToDate) {
		os.RemoveAll(fresh)
		return "", ferr
	}
	sha, ferr := commitOf(fr, hash)
	if ferr != nil {
		os.RemoveAll(fresh)
		return "", ferr
	}
	old := s.dir + ".old"
	os.RemoveAll(old)
	if err := os.Rename(s.dir, old); err != nil {
		return "", err
	}
	if err := os.Rename(fresh, s.dir); err != nil {
		_ = os.Rename(old, s.dir)
		return "", err
	}
	os.RemoveAll(old)
	return sha, nil
}

// pickRef finds the configured ref among the server's: a full ref name, or
// a branch, else a tag (its peeled commit when it is annotated).
func pickRef(refs []*plumbing.Reference, want string) (plumbing.ReferenceName, plumbing.Hash, bool) {
	byName := map[string]plumbing.Hash{}
	for _, r := range refs {
		if r.Type() == plumbing.HashReference {
			byName[r.Name().String()] = r.Hash()
		}
	}
	candidates := []string{want}
	if !strings.HasPrefix(want, "refs/") {
		candidates = []string{"refs/heads/" + want, "refs/tags/" + want}
	}
	for _, c := range candidates {
		if h, ok := byName[c]; ok {
			if peeled, ok := byName[c+"^{}"]; ok {
				h = peeled
			}
			return plumbing.ReferenceName(c), h, true
		}
	}
	return "", plumbing.ZeroHash, false
}

func commitOf(r *git.Repository, h plumbing.Hash) (string, error) {
	if c, err := r.CommitObject(h); err == nil {
		return c.Hash.String(), nil
	}
	t, err := r.TagObject(h)
	if err != nil {
		return "", err
	}
	c, err := t.Commit()
	if err != nil {
		return "", err
	}
	return c.Hash.String(), nil
}

// Files reads the files of commit sha that a rendering of dir needs: every
// file under dir, or, when dir holds a kustomization, every file of the
// tree (a kustomization may refer to bases outside it). Paths are slash
// separated and relative to the repository root.
func (s *Source) Files(sha, dir string) (map[string][]byte, error) {
	r, err := git.PlainOpen(s.dir)
	if err != nil {
		return nil, err
	}
	return filesAt(r, sha, dir)
}

// filesAt is Files for commit sha of repository r.
func filesAt(r *git.Repository, sha, dir string) (map[string][]byte, error) {
	c, err := r.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, err
	}
	root, err := c.Tree()
	if err != nil {
		return nil, err
	}
	dir = cleanDir(dir)
	sub := root
	if dir != "" {
		if sub, err = root.Tree(dir); err != nil {
			return nil, &RenderError{File: dir, Msg: fmt.Sprintf("not a folder of the repository at %s (DEPLOY_ENGINE_PATH)", short(sha))}
		}
	}
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	walk := sub
	if hasKustomization(sub) {
		walk, prefix = root, ""
	}
	out := map[string][]byte{}
	err = walk.Files().ForEach(func(f *object.File) error {
		if !regularFile(f.Mode) {
			return nil // symlinks and submodules are not followed
		}
		if f.Size > maxFileSize {
			return fmt.Errorf("%s%s is larger than %d bytes", prefix, f.Name, maxFileSize)
		}
		rd, err := f.Reader()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rd)
		rd.Close()
		if err != nil {
			return err
		}
		out[prefix+f.Name] = b
		return nil
	})
	return out, err
}

func hasKustomization(t *object.Tree) bool {
	for _, e := range t.Entries {
		if regularFile(e.Mode) && isKustomizationName(e.Name) {
			return true
		}
	}
	return false
}

func cleanDir(dir string) string {
	dir = path.Clean("/" + dir)
	return strings.TrimPrefix(dir, "/")
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// safeGitError is a git error's text with any credential removed.
func safeGitError(err error, auth transport.AuthMethod) string {
	msg := err.Error()
	switch a := auth.(type) {
	case *githttp.BasicAuth:
		if a.Password != "" {
			msg = strings.ReplaceAll(msg, a.Password, "<redacted>")
		}
	}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return "authentication required (set DEPLOY_ENGINE_AUTH_FILE)"
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return "the credentials were refused"
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return "repository not found"
	}
	return msg
}
