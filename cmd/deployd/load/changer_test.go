package load

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// stampPrefix starts every tag the changer writes; the rest is the time
// the change was sent, in Unix nanoseconds (19 digits).
const stampPrefix = "lt-"

// stamp is the tag of a change sent at t.
func stamp(t time.Time) string { return stampPrefix + strconv.FormatInt(t.UnixNano(), 10) }

// stampIn finds the first stamp in a frame (an SSE data line, a watch
// event) and returns the time it carries. The prefix may also end a word
// ("default-"): an occurrence not followed by 19 digits is passed over.
func stampIn(b []byte) (time.Time, bool) {
	for {
		i := bytes.Index(b, []byte(stampPrefix))
		if i < 0 || len(b) < i+len(stampPrefix)+19 {
			return time.Time{}, false
		}
		b = b[i+len(stampPrefix):]
		if n, err := strconv.ParseUint(string(b[:19]), 10, 63); err == nil {
			return time.Unix(0, int64(n)), true
		}
	}
}

// changer changes the fleet's Apps at a steady rate through the API
// server: each change sets one App's spec.image.tag to the stamp of the
// moment it was sent, Apps taken in turn.
type changer struct {
	dyn  dynamic.Interface
	apps []types.NamespacedName

	Sent, Failed atomic.Int64
	mu           sync.Mutex
	last         map[types.NamespacedName]string // the last tag each App was given
}

// newChanger lists the cluster's Apps (those the changer will change).
func newChanger(tb testing.TB, c *clustertest.Cluster) *changer {
	tb.Helper()
	return newChangerIn(tb, c, metav1.NamespaceAll)
}

// newChangerIn is newChanger for the Apps of one namespace.
func newChangerIn(tb testing.TB, c *clustertest.Cluster, namespace string) *changer {
	tb.Helper()
	dyn, err := dynamic.NewForConfig(fleet.FastConfig(c.Config))
	if err != nil {
		tb.Fatal(err)
	}
	list, err := dyn.Resource(projection.KindApp.GVR()).Namespace(namespace).List(tb.Context(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	ch := &changer{dyn: dyn, last: map[types.NamespacedName]string{}}
	for _, it := range list.Items {
		ch.apps = append(ch.apps, types.NamespacedName{Namespace: it.GetNamespace(), Name: it.GetName()})
	}
	if len(ch.apps) == 0 {
		tb.Fatal("the cluster holds no App to change")
	}
	return ch
}

// run sends rate changes a second until ctx ends, from workers requests
// in flight at most. A change that fails (the API server restarting) is
// counted and not retried: the next one goes to the next App.
func (ch *changer) run(ctx context.Context, rate, workers int) {
	jobs := make(chan int, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				ch.change(ctx, ch.apps[i%len(ch.apps)])
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			close(jobs)
			wg.Wait()
			return
		case <-tick.C:
			select {
			case jobs <- i:
			default: // every worker busy: the API server is the bottleneck; skip a beat
			}
		}
	}
}

// change sets one App's tag to the stamp of now.
func (ch *changer) change(ctx context.Context, app types.NamespacedName) {
	tag := stamp(time.Now())
	patch := fmt.Appendf(nil, `{"spec":{"image":{"tag":%q}}}`, tag)
	_, err := ch.dyn.Resource(projection.KindApp.GVR()).Namespace(app.Namespace).
		Patch(ctx, app.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		ch.Failed.Add(1)
		return
	}
	ch.Sent.Add(1)
	ch.mu.Lock()
	ch.last[app] = tag
	ch.mu.Unlock()
}
