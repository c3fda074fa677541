package handlers

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// peerPositionsPath is where a replica asks its peers for the position a
// compact stream id names (docs/decisions/0014).
const peerPositionsPath = "/v1/deploy/peer/positions/"

// peerLookupWait bounds a question to the peers: a stream resuming from
// an id none answers for in that time is reset.
const peerLookupWait = 2 * time.Second

// peerPosition answers a peer: the written position of a compact id this
// replica gave, text/plain. Only a replica asks (auth.LookupHeader); a
// position says no more than the ids every client is given.
func (s *Server) peerPosition(c echo.Context) error {
	id := "@" + c.Param("id")
	if err := projection.CheckID(id); err != nil {
		return errorf(http.StatusBadRequest, "not a compact stream id: "+err.Error())
	}
	if err := s.d.Peering.VerifyLookup(c.Request().Header.Get(auth.LookupHeader), c.Request().URL.Path); err != nil {
		return errorf(http.StatusUnauthorized, "only another replica asks for a position: "+err.Error())
	}
	written := s.d.Positions.Written(id)
	if written == "" {
		return errorf(http.StatusNotFound, "this replica holds no position of "+id)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(written))
}

// lookupPosition asks every peer at once for the written position of id
// and returns the first answer that is id's (its digest is id), "" when
// none has it.
func (s *Server) lookupPosition(ctx context.Context, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, peerLookupWait)
	defer cancel()
	path := peerPositionsPath + id[1:]
	proof, err := s.d.Peering.SignLookup(path)
	if err != nil {
		return "", err
	}
	bases := s.d.Peers.Bases(ctx)
	answers := make(chan string, len(bases))
	for _, base := range bases {
		go func() {
			answers <- s.askPeer(ctx, base+path, proof)
		}()
	}
	for range bases {
		select {
		case w := <-answers:
			if w != "" && projection.IDOf(w) == id {
				return w, nil
			}
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return "", nil
}

// maxPeerPosition bounds a peer's answer: a written position of
// projection's largest.
const maxPeerPosition = 64 << 10

// askPeer is one peer's answer, "" for none.
func (s *Server) askPeer(ctx context.Context, url, proof string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ""
	}
	req.Header.Set(auth.LookupHeader, proof)
	resp, err := s.forwardClient().Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPeerPosition+1))
	if err != nil || len(b) > maxPeerPosition {
		return ""
	}
	return string(b)
}
