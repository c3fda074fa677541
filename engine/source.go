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

func (s *Source) open() (*git.Repository, error) {
	r, err := git.PlainOpen(s.dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("cache folder: %w", err)
		}
		r, err = git.PlainInit(s.dir, true)
	}
	if err != nil {
		return nil, err
	}
	if _, err := r.Remote("origin"); errors.Is(err, git.ErrRemoteNotFound) {
		_, err = r.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{s.repo}})
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return r, nil
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
		return sha, nil // already here: nothing to fetch
	}
	err = remote.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []gitconfig.RefSpec{gitconfig.RefSpec("+" + name.String() + ":refs/deployd/fetched")},
		Depth:    1,
		Auth:     s.auth,
		Tags:     git.NoTags,
		Force:    true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		// A shallow cache go-git cannot extend is fetched afresh once.
		if ctx.Err() != nil {
			return "", err
		}
		if rmErr := os.RemoveAll(s.dir); rmErr != nil {
			return "", err
		}
		if r, err = s.open(); err != nil {
			return "", err
		}
		remote, _ = r.Remote("origin")
		err = remote.FetchContext(ctx, &git.FetchOptions{
			RefSpecs: []gitconfig.RefSpec{gitconfig.RefSpec("+" + name.String() + ":refs/deployd/fetched")},
			Depth:    1, Auth: s.auth, Tags: git.NoTags, Force: true,
		})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return "", err
		}
	}
	return commitOf(r, hash)
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
		if !f.Mode.IsFile() {
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
		if e.Mode.IsFile() && isKustomizationName(e.Name) {
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
