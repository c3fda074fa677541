package stream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/hanzoai/deploy/projection"
)

// History answers which application rows the cluster held at a past
// position, from the API server (a list at exactly that resourceVersion).
// It returns an error wrapping ErrHistoryGone when the cluster no longer
// holds that position (etcd compacted past it).
type History interface {
	RowsAt(ctx context.Context, pos projection.Position) (*PastRows, error)
}

// ErrHistoryGone: the cluster no longer holds the position asked for.
var ErrHistoryGone = errors.New("the cluster no longer holds that resourceVersion")

// PastRows are the application rows the cluster held at a past position,
// with what scope and filters read (projection.Store.PastRows).
type PastRows struct {
	Rows []projection.PastRow
}

// histories shares one History answer among the streams resuming from one
// position at once (a replica that just started takes many from the same
// moment), and keeps the last few.
type histories struct {
	src History
	mu  sync.Mutex
	lru *simplelru.LRU[string, *historyCall]
}

type historyCall struct {
	done chan struct{}
	rows *PastRows
	err  error
}

func newHistories(src History) *histories {
	lru, _ := simplelru.NewLRU[string, *historyCall](8, nil)
	return &histories{src: src, lru: lru}
}

// at returns the rows at pos, asking the source once per position.
func (h *histories) at(ctx context.Context, pos projection.Position) (*PastRows, error) {
	key := pos.String()
	h.mu.Lock()
	call, ok := h.lru.Get(key)
	if !ok {
		call = &historyCall{done: make(chan struct{})}
		h.lru.Add(key, call)
		go func() {
			// Not the stream's context: the answer is shared.
			cctx, cancel := context.WithTimeout(context.Background(), historyTimeout)
			defer cancel()
			call.rows, call.err = h.src.RowsAt(cctx, pos)
			if call.err != nil && !errors.Is(call.err, ErrHistoryGone) {
				h.mu.Lock()
				if c, ok := h.lru.Peek(key); ok && c == call {
					h.lru.Remove(key) // a failure is not remembered; gone is
				}
				h.mu.Unlock()
			}
			close(call.done)
		}()
	}
	h.mu.Unlock()
	select {
	case <-call.done:
		return call.rows, call.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// historyTimeout bounds one History answer.
const historyTimeout = 30 * time.Second

// fromHistory catches a client at position pos up from the cluster's
// history, when the ring does not cover pos: the rows the view sees now
// that it did not see at pos are ADDED, those it sees both then and now
// whose tree holds an object newer than pos are MODIFIED, and those it saw
// then and not now are DELETED (carrying the row as it was); the last
// carries the position the client then holds as its id; the stream goes
// on from the ring after the snapshot's revision. It answers that
// revision and position. Only the clusters this replica has changes of
// since pos are asked of the history: of another (one the client holds
// as this replica does, or newer, or one this replica holds nothing of,
// as it has not answered since the replica started) the client keeps its
// rows and its part of the position, and that cluster's API server,
// which may not answer, is not asked. false (nothing written): no history
// (none configured, not synced, compacted, failed): the client is reset.
func (h *Hub) fromHistory(ctx context.Context, out *eventWriter, spec *view, pos projection.Position) (uint64, projection.Position, bool) {
	h.mu.Lock()
	synced := h.synced
	h.mu.Unlock()
	if h.hist == nil || !synced {
		return 0, projection.Position{}, false
	}
	snap := h.src.Snapshot()
	asked := pos.Behind(snap.Position)
	past := &PastRows{}
	if !asked.IsZero() {
		var err error
		past, err = h.hist.at(ctx, asked)
		if errors.Is(err, ErrHistoryGone) {
			h.log.Info("stream resume: the cluster no longer holds the client's position; resetting it", "position", pos)
			return 0, projection.Position{}, false
		}
		if err != nil {
			h.log.Warn("stream resume: reading the cluster's history failed; resetting the client", "position", pos, "err", err)
			return 0, projection.Position{}, false
		}
	}
	// The client ends with this replica's condition of every cluster it
	// is sent rows of again or anew, and keeps its own of the others.
	marks := pos
	for i := range snap.Position.Len() {
		if pos.Of(i) == 0 || (!pos.SameDown(snap.Position, i) && snap.Position.Of(i) >= pos.Of(i)) {
			marks = marks.WithDown(i, snap.Position.Down(i))
		}
	}
	at := snap.Position.Max(pos).WithMarksOf(marks)
	rows := spec.rows(snap)
	was := make(map[projection.AppKey]*projection.PastRow, len(past.Rows))
	for i := range past.Rows {
		p := &past.Rows[i]
		if spec.sees(p.Row, p.Key, rowAttrs{org: p.Org, project: p.Project, env: p.Env}) {
			was[p.Key] = p
		}
	}
	var frames [][]byte
	for _, a := range rows {
		c := a.ClusterIndex()
		// A cluster the client holds with another condition than this
		// replica sees (another replica's observation): its rows again.
		cond := pos.Of(c) != 0 && !pos.SameDown(snap.Position, c) && snap.Position.Of(c) >= pos.Of(c)
		if asked.Of(c) == 0 && pos.Of(c) != 0 {
			if cond {
				frames = append(frames, spec.encode(projection.Modified, a.ApplicationJSON()))
			}
			continue // the client keeps its other rows of a cluster not asked
		}
		p, ok := was[a.Key()]
		delete(was, a.Key())
		switch {
		case !ok:
			frames = append(frames, spec.encode(projection.Added, a.ApplicationJSON()))
		case p.Row != a.Row || a.Changed(asked) || cond:
			frames = append(frames, spec.encode(projection.Modified, a.ApplicationJSON()))
		}
	}
	gone := make([]*projection.PastRow, 0, len(was))
	for _, p := range was {
		gone = append(gone, p)
	}
	slices.SortFunc(gone, func(a, b *projection.PastRow) int { return compareKeys(a.Key, b.Key) })
	for _, p := range gone {
		frames = append(frames, spec.encode(projection.Deleted, projection.GoneApplicationJSON(p.Key, p.Org, p.Project, p.Env, p.ResourceVersion)))
	}
	h.replayEncodings.Add(uint64(len(frames)))
	for i, f := range frames {
		if i%64 == 0 && (ctx.Err() != nil || out.err != nil) {
			return 0, projection.Position{}, false
		}
		if i == len(frames)-1 {
			out.write(appendID(nil, at))
		}
		out.write(f)
	}
	if len(frames) == 0 {
		out.write(append(appendID(nil, at), '\n'))
	}
	h.historyResumes.Add(1)
	return snap.Revision, at, out.flush() == nil
}

func compareKeys(a, b projection.AppKey) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func newHistoriesOf(src History) *histories {
	if src == nil {
		return nil
	}
	return newHistories(src)
}
