package handlers

import (
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/projection"
)

// positionWait bounds how long a request naming a position this replica has
// not folded yet waits for it: replicas of one cluster are normally
// milliseconds apart.
const positionWait = 3 * time.Second

// statusClientClosed is logged for a request whose client went away
// before it could be answered (nginx's 499).
const statusClientClosed = 499

// positionPoll is how often such a request looks again.
const positionPoll = 10 * time.Millisecond

// snapshotAt returns the snapshot once it is at or past every position the
// request names: min (a list's resourceVersion parameter) and the
// positions leading its If-None-Match tags, waiting up to positionWait. A
// client moving between replicas so never sees an answer older than one it
// had. A resourceVersion still not reached is a 504, as the API server
// answers a resourceVersion it has not reached ("Too large resource
// version"); an If-None-Match one is answered with what is here (the tag
// will not match).
func (s *Server) snapshotAt(c echo.Context, min projection.Position) (*projection.Snapshot, error) {
	snap := s.d.Snapshots.Snapshot()
	want := min.Max(s.taggedPosition(c.Request().Header.Get("If-None-Match")))
	if snap.Position.Covers(want) {
		return snap, nil
	}
	ctx := c.Request().Context()
	deadline := time.Now().Add(positionWait)
	t := time.NewTicker(positionPoll)
	defer t.Stop()
	for !snap.Position.Covers(want) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			// Answered to no one: the access log says the client left,
			// not that the server failed.
			return nil, errorf(statusClientClosed, "the client closed the request while it waited for a resourceVersion")
		case <-t.C:
		}
		snap = s.d.Snapshots.Snapshot()
	}
	if !snap.Position.Covers(min) {
		return nil, errorf(http.StatusGatewayTimeout, "resourceVersion "+min.String()+
			" is newer than this replica has seen ("+snap.Position.String()+") after "+positionWait.String()+"; retry, or list without resourceVersion")
	}
	return snap, nil
}

// taggedPosition is the newest position leading the entity tags of an
// If-None-Match header ("<position>-<digest>"), zero when none. The tags
// are found between their quotes: a position of several clusters holds
// commas.
func (s *Server) taggedPosition(header string) projection.Position {
	newest := projection.ZeroPosition(s.clusterNames)
	for header != "" {
		_, rest, ok := strings.Cut(header, `"`)
		if !ok {
			break
		}
		var tag string
		if tag, header, ok = strings.Cut(rest, `"`); !ok {
			break
		}
		i := strings.LastIndexByte(tag, '-')
		if i <= 0 {
			continue
		}
		if projection.IsID(tag[:i]) {
			if p, ok := s.d.Positions.Held(tag[:i]); ok {
				newest = newest.Max(p)
			}
		} else if p, err := projection.ParsePosition(tag[:i], s.clusterNames); err == nil {
			newest = newest.Max(p)
		}
	}
	return newest
}

// listTag is the entity tag of a list of rows at snap: its position and a
// digest of its rows' Applications, the same on every replica for the same
// answer. Worked out once per view (key) and revision.
func (s *Server) listTag(snap *projection.Snapshot, key string, rows iter.Seq[*projection.App]) string {
	version := strconv.FormatUint(snap.Revision, 10)
	if cb, ok := s.cache.get("tag|"+key, version); ok {
		return cb.tag
	}
	var digest uint64
	for a := range rows {
		digest = projection.FoldDigest(digest, a)
	}
	tag := projection.ListTag(snap.Position, digest)
	s.cache.add("tag|"+key, version, &cachedBody{tag: tag})
	return tag
}
