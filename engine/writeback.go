package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// pushAttempts bounds a write-back's pushes: the first and, after each
// non-fast-forward, a fetch, the edit again, and another push.
const pushAttempts = 4

// The committer of every write-back commit; the author is the caller.
const (
	CommitterName  = "deployd"
	CommitterEmail = "deployd@localhost"
)

// TagWrite is a write-back: set the App's spec.image.tag in its file.
type TagWrite = gitops.TagWrite

// WriteError is a write-back that did not land; its text is safe for a
// client. Conflict marks one the caller may retry (the ref kept moving,
// or push is off); Invalid one that names something the request must
// change.
type WriteError struct {
	Msg      string
	conflict bool
	invalid  bool
}

func (e *WriteError) Error() string { return e.Msg }

// Conflict reports whether the write collided with the repository's state.
func (e *WriteError) Conflict() bool { return e.conflict }

// Invalid reports whether the request itself cannot be written.
func (e *WriteError) Invalid() bool { return e.invalid }

// Manages reports whether the last rendering this replica holds declared
// the App, and the file (relative to the repository root) that declares
// it (for a kustomize build, its kustomization). Whether an App is managed is
// its tracking label (the routes read it); this is only where it was last
// seen declared.
func (e *Engine) Manages(namespace, name string) (file string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	file, ok = e.files[objKey{projection.KindApp, namespace, name}]
	return file, ok
}

// PushEnabled reports whether rollbacks and releases are written to git.
func (e *Engine) PushEnabled() bool { return e.cfg.Push }

// WriteTag commits the App's new tag to the file that declares it at the
// head of the engine's branch and pushes it (never forced; a
// non-fast-forward is fetched, edited again and pushed again, a bounded
// number of times), then reconciles at once. It answers the new commit's
// SHA, or "" when the tag is already the declared one. Write-backs run one
// at a time; with a Lease only the leader writes (ErrNotLeader elsewhere),
// and a write-back stops when the leader's term ends.
func (e *Engine) WriteTag(ctx context.Context, w TagWrite) (string, error) {
	if !e.cfg.Push {
		return "", &WriteError{Msg: "write-back is off (set DEPLOY_ENGINE_PUSH=true)", conflict: true}
	}
	if !cleanTag(w.Tag) {
		return "", &WriteError{Msg: fmt.Sprintf("tag %q is not an image tag", sanitizeLine(w.Tag)), invalid: true}
	}
	if w.Verb != "rollback" && w.Verb != "release" {
		return "", &WriteError{Msg: "unknown write-back " + sanitizeLine(w.Verb), invalid: true}
	}
	if e.cfg.Lease != nil {
		t := e.currentTerm()
		if t == nil {
			return "", ErrNotLeader
		}
		var cancel context.CancelFunc
		ctx, cancel = joinContexts(ctx, t.ctx)
		defer cancel()
	}
	if su := e.suspension(); su != nil {
		return "", &WriteError{Msg: (&SuspendedError{*su}).Error() + "; nothing was committed", conflict: true}
	}
	sha, file, err := e.git.write(ctx, w, e.fenced)
	if err != nil || sha == "" {
		return "", err
	}
	e.log.Info("engine write-back", "app", w.Namespace+"/"+w.Name, "tag", w.Tag, "verb", w.Verb,
		"file", file, "commit", sha, "requestId", sanitizeID(w.RequestID))
	// Reconcile that revision at once: the run it joins fetches after the
	// push. The commit landed whatever the run says.
	if _, err := e.Reconcile(ctx, gitops.TriggerRequest, false); err != nil {
		e.log.Warn("engine write-back: the reconcile after the push failed", "commit", sha, "error", err.Error())
	}
	return sha, nil
}

// gitWriter is the engine's side that writes to the repository and reads
// its history, apart from the runs: a full clone of the branch beside the
// runs' shallow cache (CacheDir + ".writeback"), one write-back (or history
// read that fetches) at a time.
type gitWriter struct {
	cfg  Config
	auth transport.AuthMethod

	mu     sync.Mutex // one write-back, or one history read that fetches, at a time
	histMu sync.Mutex // guards history
	// history caches History's answers at one head of the branch, by file
	// and App; a new head empties it.
	history struct {
		head  string
		byApp map[string][]gitops.GitCommit
	}
	now func() time.Time
	// beforePush, when set (by tests), runs before each push.
	beforePush func(attempt int)
}

// write commits w on top of the branch's head and pushes it (never forced;
// a non-fast-forward is fetched, edited again and pushed again, up to
// pushAttempts times); fenced is asked before each push. It answers the
// commit and the file it edited; "" when the tag is declared already.
func (g *gitWriter) write(ctx context.Context, w TagWrite, fenced func() error) (sha, file string, err error) {
	branch, err := g.branch()
	if err != nil {
		return "", "", err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r, err := g.writeRepo()
	if err != nil {
		return "", "", fmt.Errorf("the write-back cache: %w", err)
	}
	for attempt := 1; ; attempt++ {
		base, err := g.fetchBranch(ctx, r, branch)
		if err != nil {
			return "", "", err
		}
		if file, err = g.declaringFile(ctx, r, base, w.Namespace, w.Name); err != nil {
			return "", "", err
		}
		commit, err := g.commitTag(r, base, file, w)
		if err != nil || commit == plumbing.ZeroHash {
			return "", "", err
		}
		if g.beforePush != nil {
			g.beforePush(attempt)
		}
		if err := fenced(); err != nil {
			return "", "", err
		}
		err = g.push(ctx, r, commit, branch)
		if err == nil {
			return commit.String(), file, nil
		}
		if !nonFastForward(err) {
			return "", "", &WriteError{Msg: "push " + g.cfg.Repo + " " + branch + ": " + safeGitError(err, g.auth)}
		}
		if attempt == pushAttempts {
			return "", "", &WriteError{Msg: fmt.Sprintf("%s %s kept moving: %d pushes were refused as non-fast-forward; try again", g.cfg.Repo, branch, pushAttempts), conflict: true}
		}
	}
}

// declaringFile is the file under the engine's path that declares the App
// at commit c: the repository, not this process's memory, says where it
// lives. An App from a kustomize build, or one no file declares, cannot be
// edited (a conflict naming why).
func (g *gitWriter) declaringFile(ctx context.Context, r *git.Repository, c *object.Commit, namespace, name string) (string, error) {
	at := short(c.Hash.String())
	files, err := filesAt(r, c.Hash.String(), g.cfg.Path)
	if err != nil {
		return "", &WriteError{Msg: fmt.Sprintf("%s at %s: %s", g.cfg.Path, at, err.Error()), conflict: true}
	}
	dir := cleanDir(g.cfg.Path)
	for _, k := range kustomizationNames {
		if _, ok := files[path.Join(dir, k)]; ok {
			return "", &WriteError{Msg: fmt.Sprintf("App %s/%s comes from a kustomize build: commit the tag by hand", namespace, name), conflict: true}
		}
	}
	docs, err := Render(ctx, files, g.cfg.Path)
	if err != nil {
		return "", &WriteError{Msg: fmt.Sprintf("%s at %s does not render: %s", g.cfg.Repo, at, err.Error()), conflict: true}
	}
	for _, d := range docs {
		u := d.Object
		if projection.LookupKindByAPIVersion(u.GetAPIVersion(), u.GetKind()) != projection.KindApp || u.GetName() != name {
			continue
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = g.cfg.Namespace
		}
		if ns == namespace {
			return d.File, nil
		}
	}
	return "", &WriteError{Msg: fmt.Sprintf("no file under %s in %s at %s declares App %s/%s: declare it in git (an App the engine does not declare is not written back)",
		g.cfg.Path, g.cfg.Repo, at, sanitizeLine(namespace), sanitizeLine(name)), invalid: true}
}

// branch is the full name of the engine's ref, which must be a branch.
func (g *gitWriter) branch() (string, error) {
	ref := g.cfg.Ref
	switch {
	case strings.HasPrefix(ref, "refs/heads/"):
		return ref, nil
	case strings.HasPrefix(ref, "refs/"):
		return "", &WriteError{Msg: "the engine's ref " + ref + " is not a branch: write-back needs one", conflict: true}
	}
	return "refs/heads/" + ref, nil
}

// writeRepo opens (or creates) the write-back's bare repository: a full
// clone of the branch beside the run's shallow cache, so that commits have
// their parents and history can be read.
func (g *gitWriter) writeRepo() (*git.Repository, error) {
	dir := g.cfg.CacheDir + ".writeback"
	r, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		r, err = git.PlainInit(dir, true)
	}
	if err != nil {
		return nil, err
	}
	if _, err := r.Remote("origin"); errors.Is(err, git.ErrRemoteNotFound) {
		if _, err := r.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{g.cfg.Repo}}); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return r, nil
}

const baseRef = plumbing.ReferenceName("refs/deployd/writeback-base")

// fetchBranch fetches the branch (its whole history) and answers its head.
func (g *gitWriter) fetchBranch(ctx context.Context, r *git.Repository, branch string) (*object.Commit, error) {
	remote, err := r.Remote("origin")
	if err != nil {
		return nil, err
	}
	err = remote.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []gitconfig.RefSpec{gitconfig.RefSpec("+" + branch + ":" + baseRef.String())},
		Auth:     g.auth, Tags: git.NoTags, Force: true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, &WriteError{Msg: "fetch " + g.cfg.Repo + " " + branch + ": " + safeGitError(err, g.auth)}
	}
	ref, err := r.Reference(baseRef, true)
	if err != nil {
		return nil, err
	}
	return r.CommitObject(ref.Hash())
}

// commitTag writes the commit that edits the tag on top of base; the zero
// hash when the tag is already declared there.
func (g *gitWriter) commitTag(r *git.Repository, base *object.Commit, file string, w TagWrite) (plumbing.Hash, error) {
	root, err := base.Tree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	f, err := root.File(file)
	if err != nil {
		return plumbing.ZeroHash, &WriteError{Msg: file + " is no longer in " + g.cfg.Ref + " at " + short(base.Hash.String()), conflict: true}
	}
	content, err := f.Contents()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	out, _, changed, err := EditTag([]byte(content), w.Namespace, w.Name, g.cfg.Namespace, w.Tag)
	if err != nil {
		return plumbing.ZeroHash, &WriteError{Msg: file + ": " + err.Error(), conflict: true}
	}
	if !changed {
		return plumbing.ZeroHash, nil
	}
	blob, err := writeObject(r.Storer, plumbing.BlobObject, func(wr io.Writer) error { _, err := wr.Write(out); return err })
	if err != nil {
		return plumbing.ZeroHash, err
	}
	tree, err := replaceBlob(r, root, strings.Split(file, "/"), blob)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	now := g.now()
	author := object.Signature{Name: sanitizeLine(w.AuthorName), Email: sanitizeEmail(w.AuthorEmail), When: now}
	if author.Name == "" {
		author.Name = "deployd"
	}
	committer := object.Signature{Name: CommitterName, Email: CommitterEmail, When: now}
	c := &object.Commit{
		Author: author, Committer: committer, TreeHash: tree, ParentHashes: []plumbing.Hash{base.Hash},
		Message: CommitMessage(w),
	}
	o := r.Storer.NewEncodedObject()
	if err := c.Encode(o); err != nil {
		return plumbing.ZeroHash, err
	}
	return r.Storer.SetEncodedObject(o)
}

// CommitMessage is a write-back's message: the subject and a Request-Id
// trailer. Every part is reduced to characters that cannot break a line.
func CommitMessage(w TagWrite) string {
	subject := fmt.Sprintf("deploy: roll back %s/%s to %s", sanitizeLine(w.Namespace), sanitizeLine(w.Name), sanitizeLine(w.Tag))
	if w.Verb == "release" {
		subject = fmt.Sprintf("deploy: release %s/%s %s", sanitizeLine(w.Namespace), sanitizeLine(w.Name), sanitizeLine(w.Tag))
	}
	msg := subject + "\n"
	if id := sanitizeID(w.RequestID); id != "" {
		msg += "\nRequest-Id: " + id + "\n"
	}
	return msg
}

func writeObject(s storer.EncodedObjectStorer, t plumbing.ObjectType, fill func(io.Writer) error) (plumbing.Hash, error) {
	o := s.NewEncodedObject()
	o.SetType(t)
	wr, err := o.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := fill(wr); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := wr.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(o)
}

// replaceBlob writes the trees from the file's folder up to the root with
// the file's entry pointing at blob, and answers the new root tree.
func replaceBlob(r *git.Repository, t *object.Tree, parts []string, blob plumbing.Hash) (plumbing.Hash, error) {
	entries := append([]object.TreeEntry(nil), t.Entries...)
	i := -1
	for j, en := range entries {
		if en.Name == parts[0] {
			i = j
		}
	}
	if i < 0 {
		return plumbing.ZeroHash, fmt.Errorf("%s is not in the tree", parts[0])
	}
	if len(parts) == 1 {
		entries[i].Hash = blob
	} else {
		sub, err := r.TreeObject(entries[i].Hash)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := replaceBlob(r, sub, parts[1:], blob)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries[i].Hash = h
	}
	nt := &object.Tree{Entries: entries}
	o := r.Storer.NewEncodedObject()
	if err := nt.Encode(o); err != nil {
		return plumbing.ZeroHash, err
	}
	return r.Storer.SetEncodedObject(o)
}

const pushRef = plumbing.ReferenceName("refs/deployd/writeback")

// push sends commit to the branch, never forced.
func (g *gitWriter) push(ctx context.Context, r *git.Repository, commit plumbing.Hash, branch string) error {
	if err := r.Storer.SetReference(plumbing.NewHashReference(pushRef, commit)); err != nil {
		return err
	}
	return r.PushContext(ctx, &git.PushOptions{
		RemoteName: "origin",
		RefSpecs:   []gitconfig.RefSpec{gitconfig.RefSpec(pushRef.String() + ":" + branch)},
		Auth:       g.auth,
	})
}

func nonFastForward(err error) bool {
	if errors.Is(err, git.ErrNonFastForwardUpdate) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "non-fast-forward") || strings.Contains(msg, "fetch first") || strings.Contains(msg, "failed to lock")
}

// contains reports whether commit sha is head or one of its ancestors.
func (g *gitWriter) contains(r *git.Repository, head, sha string) bool {
	if head == "" {
		return false
	}
	h, err := r.CommitObject(plumbing.NewHash(head))
	if err != nil {
		return false
	}
	c, err := r.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return false
	}
	ok, err := c.IsAncestor(h)
	return err == nil && ok
}

// sanitizeLine keeps printable characters other than <, > and newlines, at
// most 200 bytes.
func sanitizeLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '<' || r == '>' || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			continue
		}
		if b.Len() >= 200 {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

func sanitizeEmail(s string) string {
	s = sanitizeLine(s)
	if strings.ContainsAny(s, " \t") || !strings.Contains(s, "@") {
		return ""
	}
	return s
}

// sanitizeID keeps [A-Za-z0-9._-], at most 64 bytes.
func sanitizeID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			b.WriteRune(r)
		}
		if b.Len() >= 64 {
			break
		}
	}
	return b.String()
}
