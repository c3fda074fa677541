package stream

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// TreeRequest is one resource-tree stream.
type TreeRequest struct {
	Scope auth.Scope
	// Key names the application row (operator App or site; a CD
	// Application when no such row exists and the scope sees everything).
	Key projection.AppKey
	// Expiry ends the stream when the caller's credential expires (zero:
	// never).
	Expiry time.Time
}

// treeSubscriber is one tree stream. The hub only signals it (coalesced:
// one pending signal at most); the stream reads the snapshot itself, so a
// burst of changes costs it one send of the latest tree.
type treeSubscriber struct {
	key     projection.AppKey
	cancel  context.CancelCauseFunc
	signal  chan struct{}
	pingDue atomic.Bool
}

func (t *treeSubscriber) notify() {
	select {
	case t.signal <- struct{}{}:
	default:
	}
}

func (t *treeSubscriber) ping() {
	t.pingDue.Store(true)
	t.notify()
}

// ServeTree streams an application's resource tree: {"result":<tree>} at
// once, then the whole tree again each time it changes, never on a timer.
// Changes that arrive while the client is being written to are coalesced
// into one send of the latest tree. The stream ends when the application
// is deleted or leaves the caller's scope (nothing else is sent), when the
// client goes away, when the credential expires, or when the hub stops.
// It returns ErrNotFound, before writing anything, when the caller does not
// see the application; other errors are as for ServeApplications.
func (h *Hub) ServeTree(w http.ResponseWriter, r *http.Request, req TreeRequest) error {
	out, err := newEventWriter(w)
	if err != nil {
		return err
	}
	wait, err := h.expiryWait(req.Expiry)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(errStreamDone)
	t := &treeSubscriber{key: req.Key, cancel: cancel, signal: make(chan struct{}, 1)}
	// Subscribe, then read the snapshot: a change published after this
	// point signals t.
	if err := h.enterTree(t); err != nil {
		return err
	}
	defer h.leaveTree(t)
	a := h.src.Snapshot().Get(req.Key.Namespace, req.Key.Name)
	if a == nil && req.Scope.IsAll() {
		a = h.src.Snapshot().GetCD(req.Key.Namespace, req.Key.Name)
	}
	if a == nil || !Visible(req.Scope, a) {
		return ErrNotFound
	}
	row := a.Row
	defer out.finish()
	defer h.bindLifetime(ctx, r, out, wait, cancel)()
	if out.start(h.opts.Retry) != nil {
		return nil
	}
	sent := a.TreeRevision
	out.write(treeFrame(a))
	if out.flush() != nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			h.log.Debug("tree stream ended", "scope", req.Scope.Key(), "reason", context.Cause(ctx))
			return nil
		case <-t.signal:
		}
		snap := h.src.Snapshot()
		if row == projection.RowCD {
			a = snap.GetCD(req.Key.Namespace, req.Key.Name)
		} else {
			a = snap.Get(req.Key.Namespace, req.Key.Name)
		}
		if a == nil || !Visible(req.Scope, a) {
			h.log.Debug("tree stream ended", "scope", req.Scope.Key(), "reason", errLeftScope)
			return nil
		}
		if a.TreeRevision != sent {
			sent = a.TreeRevision
			out.write(treeFrame(a))
		}
		if t.pingDue.Swap(false) {
			out.write(pingFrame)
		}
		if out.flush() != nil {
			return nil
		}
	}
}

func treeFrame(a *projection.App) []byte {
	tree := a.ApplicationTreeJSON()
	b := make([]byte, 0, len(tree)+len("data: {\"result\":}\n\n"))
	b = append(b, `data: {"result":`...)
	b = append(b, tree...)
	return append(b, "}\n\n"...)
}

func (h *Hub) enterTree(t *treeSubscriber) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return ErrHubStopped
	}
	set := h.trees[t.key]
	if set == nil {
		set = map[*treeSubscriber]struct{}{}
		h.trees[t.key] = set
	}
	set[t] = struct{}{}
	h.ntrees++
	h.active.Add(1)
	return nil
}

func (h *Hub) leaveTree(t *treeSubscriber) {
	h.mu.Lock()
	if set := h.trees[t.key]; set != nil {
		delete(set, t)
		if len(set) == 0 {
			delete(h.trees, t.key)
		}
	}
	h.ntrees--
	h.mu.Unlock()
	h.active.Done()
}
