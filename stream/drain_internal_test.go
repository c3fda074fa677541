package stream

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/hanzoai/deploy/projection"
)

// TestDrainQueuesTheHeldFrame: a stream drained after its view's batch was
// fanned out but before the batch's id went out (the frame still held by
// the view) writes that frame, with the id, before the drain comment; the
// view's other subscribers still get it when the batch ends.
func TestDrainQueuesTheHeldFrame(t *testing.T) {
	h := &Hub{
		log:     slog.New(slog.DiscardHandler),
		views:   map[string]*view{},
		clients: map[*subscriber]struct{}{},
	}
	sub := func() *subscriber {
		s := &subscriber{max: 8, wake: make(chan struct{}, 1), cancel: func(error) {}}
		h.clients[s] = struct{}{}
		return s
	}
	drained, stays := sub(), sub()
	v := &view{key: "all"}
	h.mu.Lock()
	h.join(drained, v, 0, projection.Position{})
	h.join(stays, v, 0, projection.Position{})
	v.held, v.heldRev, v.heldPos = []byte("data: change\n\n"), 3, projection.At(7)
	h.idViews = append(h.idViews, v)
	h.mu.Unlock()

	cut, stop := context.WithCancel(t.Context())
	stop() // finish gives up at once: only the queue is checked here
	if !h.drainApplications(drained, errDrained, cut.Done()) {
		t.Fatal("drainApplications: the stream had ended")
	}
	h.mu.Lock()
	h.queueIDs()
	h.mu.Unlock()

	frames := func(s *subscriber) []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []string
		for _, f := range s.pending {
			out = append(out, string(f))
		}
		return out
	}
	if got, want := frames(drained), []string{"id: 7\n", "data: change\n\n", string(drainFrame)}; !slices.Equal(got, want) {
		t.Errorf("the drained stream's queue: %q, want %q", got, want)
	}
	if got, want := frames(stays), []string{"id: 7\n", "data: change\n\n"}; !slices.Equal(got, want) {
		t.Errorf("the other stream's queue: %q, want %q", got, want)
	}
}
