package cluster

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/hanzoai/deploy/projection"
)

// listCounts counts what one kind's informers asked the API server for,
// across restarts of the kind's informer.
type listCounts struct {
	starts  atomic.Uint64 // informers started
	lists   atomic.Uint64 // LIST requests
	streams atomic.Uint64 // watches that begin with the initial objects (a list as a stream)
	watches atomic.Uint64 // plain watches, resuming from a resourceVersion
}

// counted wraps lw so that the kind's lists and watches are counted.
func (w *Watcher) counted(k projection.Kind, lw *cache.ListWatch) *cache.ListWatch {
	c := &w.counts[k]
	list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			c.lists.Add(1)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				c.streams.Add(1)
			} else {
				c.watches.Add(1)
			}
			return watchFn(ctx, o)
		},
		DisableChunking: lw.DisableChunking,
	}
}

// ServerVersion is the API server's version (e.g. "v1.35.0"), "" until
// discovery has answered.
func (w *Watcher) ServerVersion() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version
}

// KindCounters are one kind's informer counters since start.
type KindCounters struct {
	Kind projection.Kind
	// Relists counts initial lists beyond each informer's first: the
	// reflector lost its place (an expired resourceVersion, a failed
	// watch) and read everything again.
	Relists uint64
	// WatchRestarts counts watches reopened from a resourceVersion
	// without a list (a watch that ended or broke).
	WatchRestarts uint64
	// Objects is the number of objects the kind's informer holds for
	// watched namespaces; 0 when it is not running.
	Objects int
}

// Counters returns every registry kind's informer counters. Safe for
// concurrent use.
func (w *Watcher) Counters() []KindCounters {
	w.mu.Lock()
	held := map[projection.Kind]int{}
	for k, ki := range w.informers {
		held[k] = ki.store.Len()
	}
	w.mu.Unlock()
	var out []KindCounters
	for _, ki := range projection.Registry() {
		c := &w.counts[ki.Kind]
		starts, lists, streams, watches := c.starts.Load(), c.lists.Load(), c.streams.Load(), c.watches.Load()
		kc := KindCounters{Kind: ki.Kind, Objects: held[ki.Kind]}
		if all := lists + streams; all > starts {
			kc.Relists = all - starts
		}
		// Each LIST is followed by one watch from its resourceVersion; a
		// streamed list is its own watch.
		if watches > lists {
			kc.WatchRestarts = watches - lists
		}
		out = append(out, kc)
	}
	return out
}

// syncProgress says how far the initial sync is: served kinds whose
// informer has listed, and changes the writer folded. Called with w.mu
// held.
func (w *Watcher) syncProgress() (listed, served int, folded uint64) {
	for _, ki := range projection.Registry() {
		if !w.served[ki.Kind] {
			continue
		}
		served++
		if inf := w.informers[ki.Kind]; inf != nil && inf.synced() {
			listed++
		}
	}
	return listed, served, w.feed.Applied()
}

// progressText is the initial sync's progress in words, for the log and
// the health answer.
func progressText(listed, served int, folded uint64) string {
	return fmt.Sprintf("syncing: %d of %d kinds listed, %d objects folded", listed, served, folded)
}

// reportProgress logs the initial sync's progress every interval while
// the initial lists run, until the watcher is ready, then one line saying so with the fleet's size, the time
// it took and the process's resident memory, and calls Options.OnReady. It
// returns when ctx ends or after the ready line.
func (w *Watcher) reportProgress(ctx context.Context, start time.Time, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	// Ready is checked more often than the progress is logged, so the
	// ready line comes close to the moment.
	poll := time.NewTicker(min(every, 200*time.Millisecond))
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if st := w.Status(); st.Ready() {
				apps := 0
				w.mu.Lock()
				if ki := w.informers[projection.KindApp]; ki != nil {
					apps = ki.store.Len()
				}
				w.mu.Unlock()
				w.opts.Log.Info("ready", "apps", apps, "objects", w.feed.Applied(),
					"seconds", roundSeconds(time.Since(start)), "rssBytes", residentBytes())
				if w.opts.OnReady != nil {
					w.opts.OnReady()
				}
				return
			}
		case <-tick.C:
			// Only while the lists run: a missing CRD or an unreachable
			// API server is said once, by discovery, not every tick.
			if st := w.Status(); st.Progress != "" {
				w.opts.Log.Info("initial sync", "kindsListed", st.KindsListed, "kinds", st.KindsServed,
					"objectsFolded", st.Folded, "seconds", roundSeconds(time.Since(start)))
			}
		}
	}
}

func roundSeconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

// residentBytes is the process's resident set size from /proc, or the
// memory the Go runtime holds from the OS where /proc is not there.
func residentBytes() uint64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				return pages * uint64(os.Getpagesize())
			}
		}
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.Sys
}
