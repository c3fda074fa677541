package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
)

// The drift board's stream, GET /v1/paas/stream/apps?env=&health=&org=&drift=:
// one ADDED per row the caller sees (the same rows and filters as
// /v1/paas/apps), then a MODIFIED whenever a row's view changes, an ADDED
// or DELETED when one enters or leaves the filter. Each event is
// "data: {"result":{"type":…,"app":<AppView>}}".
//
// Why a stream of its own: a row's verdict depends on release facts, which
// are not in the projection (its fold stays pure and cluster-fed) and have
// no place in the cluster's revision sequence that the applications stream
// replays by id; an Argo CD Application carries no drift either. So this
// stream is signalled, not queued, like the tree stream: it re-reads the
// board when the release source announces a change (at once) or when the
// snapshot's revision moved (checked every boardPoll, so a burst of
// cluster changes costs one re-read), and sends only the rows whose
// encoded view differs from what it last sent. It carries no ids: a
// reconnect starts with a fresh burst of ADDED. It ends when the client
// goes away, the token expires, or the server stops.

const (
	boardPoll      = time.Second
	boardHeartbeat = 15 * time.Second
)

type boardRow struct {
	view []byte // the encoded AppView last sent
}

func (s *Server) paasStream(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	f, err := parsePaaSFilter(c.QueryParams())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if p := auth.PrincipalFrom(ctx); p != nil && !p.Expiry.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, p.Expiry)
		defer cancel()
	}
	changes := s.d.ReleaseChanges
	if changes == nil {
		changes = func() (uint64, <-chan struct{}) { return 0, nil }
	}
	w := c.Response()
	sseHeaders(w)
	if _, err := w.Write([]byte("retry: 3000\n: drift board\n\n")); err != nil {
		return nil
	}
	w.Flush()

	sent := map[string]boardRow{}
	var rev uint64
	// send re-reads the board and writes what changed. The release
	// channel is taken before the rows are read, so a change made while
	// they are read wakes the next round.
	send := func() (<-chan struct{}, bool) {
		_, relChanged := changes()
		snap := s.d.Snapshots.Snapshot()
		rev = snap.Revision
		var buf bytes.Buffer
		seen := make(map[string]bool, len(sent))
		for _, v := range s.paasRows(snap, sc) {
			if !f.match(&v) {
				continue
			}
			key := v.ID + "|" + v.Namespace
			seen[key] = true
			b, err := json.Marshal(v)
			if err != nil {
				continue
			}
			old, ok := sent[key]
			switch {
			case !ok:
				boardEvent(&buf, "ADDED", b)
			case !bytes.Equal(old.view, b):
				boardEvent(&buf, "MODIFIED", b)
			default:
				continue
			}
			sent[key] = boardRow{view: b}
		}
		for key, row := range sent {
			if !seen[key] {
				boardEvent(&buf, "DELETED", row.view)
				delete(sent, key)
			}
		}
		if buf.Len() > 0 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil, false
			}
			w.Flush()
		}
		return relChanged, true
	}
	relChanged, ok := send()
	if !ok {
		return nil
	}
	poll := time.NewTicker(boardPoll)
	defer poll.Stop()
	beat := time.NewTicker(boardHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-relChanged:
		case <-poll.C:
			if s.d.Snapshots.Snapshot().Revision == rev {
				continue
			}
		case <-beat.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return nil
			}
			w.Flush()
			continue
		}
		if relChanged, ok = send(); !ok {
			return nil
		}
	}
}

// boardEvent appends one event carrying an encoded AppView.
func boardEvent(buf *bytes.Buffer, typ string, view []byte) {
	buf.WriteString(`data: {"result":{"type":"`)
	buf.WriteString(typ)
	buf.WriteString(`","app":`)
	buf.Write(view)
	buf.WriteString("}}\n\n")
}
