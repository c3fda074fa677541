package main

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// heapOwner names who holds a part of the heap, by the frames of the
// allocation's stack.
type heapOwner struct {
	name string
	// match reports whether a stack (leaf first, function names) belongs
	// to the owner.
	match func(stack []string) bool
}

// anyFrame matches a stack with a frame whose function starts with one of
// the prefixes.
func anyFrame(prefixes ...string) func([]string) bool {
	return func(stack []string) bool {
		for _, fn := range stack {
			for _, p := range prefixes {
				if strings.HasPrefix(fn, p) {
					return true
				}
			}
		}
		return false
	}
}

// heapOwners are tried in order; the first that matches a stack owns it.
// An object's summary is decoded in the informer's transform from what the
// client decoded off the wire, and the strings it keeps (names, labels,
// images) were allocated by that wire decoding: both count as the decoded
// summaries, which the informer's store and the projection share.
var heapOwners = []heapOwner{
	{"projection: encoded forms (per App version)", anyFrame(
		"github.com/hanzoai/deploy/projection.(*encoded)", "github.com/hanzoai/deploy/projection.mustJSON")},
	{"per connection and request (net/http, echo, handlers, stream subscribers)", anyFrame("net/http.(*conn).serve")},
	{"stream: ring", anyFrame("github.com/hanzoai/deploy/stream.")},
	{"decoded summaries (shared by informer store and projection)", anyFrame(
		"github.com/hanzoai/deploy/cluster.(*Watcher).startKind.decoder", "github.com/hanzoai/deploy/cluster.decode",
		"github.com/hanzoai/deploy/projection.Decode", "k8s.io/client-go/rest")},
	{"informer store: map, keys, queue (client-go cache)", anyFrame("k8s.io/client-go/tools/cache.")},
	{"projection: rows, trees, indexes", anyFrame("github.com/hanzoai/deploy/projection.", "github.com/hanzoai/deploy/cluster.(*Feed)")},
}

// logProfile logs a heap profile's inuse_space by owner and pprof's own
// top list.
func logProfile(b *testing.B, bin, path string) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	p, err := profile.Parse(f)
	f.Close()
	if err != nil {
		b.Fatalf("parse %s: %v", path, err)
	}
	b.Log("inuse_space by owner:\n" + inuseByOwner(p))
	out, err := exec.Command("go", "tool", "pprof", "-top", "-inuse_space", "-nodecount=30", bin, path).CombinedOutput()
	if err != nil {
		b.Logf("go tool pprof: %v\n%s", err, out)
		return
	}
	b.Logf("go tool pprof -top -inuse_space:\n%s", out)
}

// inuseByOwner sums a heap profile's inuse_space by heapOwners.
func inuseByOwner(p *profile.Profile) string {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		return "the profile has no inuse_space"
	}
	sums := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		var stack []string
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function != nil {
					stack = append(stack, l.Function.Name)
				}
			}
		}
		owner := "other (runtime, protobuf, …)"
		for _, o := range heapOwners {
			if o.match(stack) {
				owner = o.name
				break
			}
		}
		sums[owner] += s.Value[idx]
		total += s.Value[idx]
	}
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(sums[b], sums[a]) })
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, "%8.1f MiB %5.1f%%  %s\n", float64(sums[n])/(1<<20), 100*float64(sums[n])/float64(max(total, 1)), n)
	}
	fmt.Fprintf(&sb, "%8.1f MiB         total inuse_space\n", float64(total)/(1<<20))
	return sb.String()
}
