package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hanzoai/deploy/gitops"
)

// historyMax bounds the commits History reads for one App.
const historyMax = 100

// History is the commits of the engine's branch that touched the file
// declaring the App at the branch's head, newest first (at most
// historyMax), each with the tag it declares. The write-back's full clone
// is fetched when the last run's revision is not in it yet; otherwise
// nothing is fetched. An App no file declares, or one from a kustomize
// build, has none.
func (e *Engine) History(ctx context.Context, namespace, name string) ([]gitops.GitCommit, error) {
	return e.git.commits(ctx, namespace, name, e.state().Revision)
}

// commits is History with want, the revision the last run applied: the
// clone is fetched when it does not hold it yet.
func (g *gitWriter) commits(ctx context.Context, namespace, name, want string) ([]gitops.GitCommit, error) {
	branch, err := g.branch()
	if err != nil {
		return nil, nil
	}
	app := namespace + "/" + name
	if !g.mu.TryLock() {
		// A write-back is under way (it may take a reconcile): a read does
		// not wait for it when it has an answer already.
		if commits, ok := g.cachedHistory("", app); ok {
			return commits, nil
		}
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	r, err := g.writeRepo()
	if err != nil {
		return nil, fmt.Errorf("the write-back cache: %w", err)
	}
	head, err := r.Reference(baseRef, true)
	if err != nil || (want != "" && head.Hash().String() != want && !g.contains(r, head.Hash().String(), want)) {
		if _, err := g.fetchBranch(ctx, r, branch); err != nil {
			return nil, err
		}
		if head, err = r.Reference(baseRef, true); err != nil {
			return nil, err
		}
	}
	if commits, ok := g.cachedHistory(head.Hash().String(), app); ok {
		return commits, nil
	}
	hc, err := r.CommitObject(head.Hash())
	if err != nil {
		return nil, err
	}
	file, err := g.declaringFile(ctx, r, hc, namespace, name)
	if err != nil {
		var we *WriteError
		if errors.As(err, &we) {
			return nil, nil // not declared in a file: no history from git
		}
		return nil, err
	}
	iter, err := r.Log(&git.LogOptions{From: head.Hash(), FileName: &file, Order: git.LogOrderCommitterTime})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var out []gitops.GitCommit
	err = iter.ForEach(func(c *object.Commit) error {
		if len(out) == historyMax {
			return errStop
		}
		gc := gitops.GitCommit{
			SHA:     c.Hash.String(),
			Author:  fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
			Date:    c.Author.When.UTC(),
			Message: strings.TrimSpace(c.Message),
		}
		if f, err := c.File(file); err == nil {
			if content, err := f.Contents(); err == nil {
				if n, err := findTag([]byte(content), namespace, name, g.cfg.Namespace); err == nil {
					gc.Tag = n.Value
				}
			}
		}
		out = append(out, gc)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	g.histMu.Lock()
	if g.history.head == head.Hash().String() {
		g.history.byApp[app] = out
	}
	g.histMu.Unlock()
	return out, nil
}

// cachedHistory is the cached answer for app; at head, when head is not
// "" (a new head empties the cache).
func (g *gitWriter) cachedHistory(head, app string) ([]gitops.GitCommit, bool) {
	g.histMu.Lock()
	defer g.histMu.Unlock()
	if head != "" && g.history.head != head {
		g.history.head, g.history.byApp = head, map[string][]gitops.GitCommit{}
	}
	commits, ok := g.history.byApp[app]
	return commits, ok
}

var errStop = errors.New("stop")
