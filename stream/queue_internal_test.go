package stream

import (
	"log/slog"
	"strconv"
	"testing"

	"github.com/hanzoai/deploy/projection"
)

// TestQueueArraysKept: a stream that takes 400 frames a round (two rounds
// of a hundred events with their ids) queues them with no allocation once
// its two arrays have grown; the arrays were given back past 256 frames,
// and grown again every round.
func TestQueueArraysKept(t *testing.T) {
	s := &subscriber{max: 1024, wake: make(chan struct{}, 1)}
	frame := []byte("data: {}\n\n")
	round := func() {
		for range 400 {
			if !s.push(frame) {
				t.Fatal("push refused below the queue's bound")
			}
		}
		if got := len(s.take()); got != 400 {
			t.Fatalf("took %d frames, want 400", got)
		}
	}
	round()
	round()
	if allocs := testing.AllocsPerRun(20, round); allocs != 0 {
		t.Errorf("%.1f allocations a round of 400 frames, want 0", allocs)
	}
}

// BenchmarkQueueHeldTo500Clusters: a batch's last frame queued, with its
// id, to 1,000 streams of one view that joined from a list's position of
// 500 clusters, as a change in one cluster after another arrives. ns/op is
// per stream and frame: the hub's part of every frame it writes.
//
//	go test -run '^$' -bench BenchmarkQueueHeldTo500Clusters ./stream/
func BenchmarkQueueHeldTo500Clusters(b *testing.B) {
	const clusters, streams = 500, 1000
	names := make([]string, clusters)
	for i := range names {
		names[i] = "alias-" + strconv.Itoa(i)
	}
	listed := projection.ZeroPosition(names)
	for i := range clusters {
		listed = listed.With(i, 1000+uint64(i))
	}
	h := &Hub{log: slog.New(slog.DiscardHandler), views: map[string]*view{}, clients: map[*subscriber]struct{}{}}
	v := &view{key: "all"}
	subs := make([]*subscriber, streams)
	h.mu.Lock()
	for i := range subs {
		subs[i] = &subscriber{max: 1 << 30, wake: make(chan struct{}, 1), cancel: func(error) {}}
		h.clients[subs[i]] = struct{}{}
		h.join(subs[i], v, 0, listed)
	}
	h.mu.Unlock()
	frame, id := []byte("data: change\n\n"), []byte("id: x\n")
	pos, rev := listed, uint64(0)
	b.ResetTimer()
	for n := 0; n < b.N; n += streams {
		c := int(rev % clusters)
		rev++
		pos = pos.With(c, pos.Of(c)+1)
		v.held, v.heldRev, v.heldPos, v.heldCluster = frame, rev, pos, uint16(c)
		h.mu.Lock()
		for _, s := range subs {
			h.queueHeldTo(v, s, id)
		}
		h.touched = h.touched[:0]
		h.mu.Unlock()
		for _, s := range subs {
			s.touched = false
			s.take()
		}
	}
}
