package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/hanzoai/deploy/projection"
)

// Options configure a Watcher.
type Options struct {
	// Namespaces is the namespace map: objects elsewhere are ignored.
	Namespaces projection.Namespaces
	// Cluster is the name the cluster's namespaces are qualified with in
	// the projection (projection.QualifyNamespace): empty for the first
	// cluster, whose namespaces stay as they are.
	Cluster string
	// Discovery is how often the served kinds are looked for (optional
	// kinds appearing, a CRD removed) while the cluster answers and serves
	// the App CRD; each wait is drawn within ±25 % of it, so that the
	// clusters of a fleet started together do not ask together. While
	// discovery fails, the App CRD is missing or the initial lists are
	// held, it is asked at least every DiscoveryRetry. Default 10s (FleetDiscovery spreads a fleet's).
	Discovery time.Duration
	// Progress is how often the initial sync's progress is logged until
	// it is ready. Default 5s.
	Progress time.Duration
	Log      *slog.Logger
	// OnReady, when set, is called once, right after the ready line: the
	// first time every informer has listed and the projection holds what
	// the lists returned. It runs on the watcher's progress goroutine.
	OnReady func()
}

// Watcher runs one informer per registry kind the API server serves,
// cluster-wide, and pushes every notification to a Feed.
type Watcher struct {
	opts  Options
	feed  *Feed
	dyn   dynamic.Interface
	disco discovery.DiscoveryInterface
	core  kubernetes.Interface // logs only
	// typed and meta read the built-in kinds in protobuf (see builtinSource);
	// nil, every kind is read through dyn.
	typed kubernetes.Interface
	meta  metadata.Interface
	// watchDyn, watchTyped and watchMeta are the same clients without
	// gzip, for the watches (nil: the watches use the clients above). A
	// list is worth compressing; a watch sends an object at a time, and a
	// gzip reader holds a 32 KiB window for as long as its watch lasts:
	// 14 kinds in each of 500 clusters held 260 MiB of them.
	watchDyn   dynamic.Interface
	watchTyped kubernetes.Interface
	watchMeta  metadata.Interface
	// reason is why there is no client, when there is none.
	reason string

	mu        sync.Mutex
	informers map[projection.Kind]*kindInformer
	served    map[projection.Kind]bool
	errs      map[projection.Kind]string
	discErr   string
	discAt    time.Time // when discovery last asked the API server
	failedAt  time.Time // when discovery began failing (zero while it answers)
	version   string    // the API server's gitVersion, once known
	running   bool
	// discovered counts the discoveries that answered; missing, by kind
	// running, the ones in a row that did not list it.
	discovered uint64
	missing    map[projection.Kind]int
	// syncMark is what the feed had been pushed when every kind had first
	// synced (marked); caughtUp, once the writer has applied that much.
	syncMark         uint64
	marked, caughtUp bool

	// counts are the informers' lists and watches, by kind.
	counts [32]listCounts

	// The hold of a late cluster's initial lists (HoldLate).
	holdMu    sync.Mutex
	late      func() bool
	answering []projection.Change // folded with the held lists
	hold      holdState
	holding   []projection.Change
}

// holdState is where a watcher is with the hold of its initial lists.
type holdState uint8

const (
	holdUndecided holdState = iota // nothing pushed yet
	holdOn                         // changes are held until every kind has listed
	holdOff                        // changes go to the feed as they come
)

// HoldLate makes the watcher hold its initial lists when late reports
// true at its first change (the plane already serves streams: the
// cluster did not answer at start): the changes are handed to the feed in
// one PushAll once every kind has listed, so its rows go out complete, at
// one position, rather than kind by kind (an App before its ReplicaSets).
// answering are folded with them: the changes that say the cluster
// answers (its lists just did), so its rows do not go out as the last
// state of a cluster that does not. Call it before Run.
func (w *Watcher) HoldLate(late func() bool, answering ...projection.Change) {
	w.holdMu.Lock()
	w.late, w.answering = late, answering
	w.holdMu.Unlock()
}

// push hands a change to the feed, or holds it (HoldLate). The first
// change decides: it is held when the plane is already serving streams
// and the watcher has not listed every kind yet (a change after lists
// that were empty is a live one).
func (w *Watcher) push(c projection.Change) {
	w.holdMu.Lock()
	undecided := w.hold == holdUndecided
	w.holdMu.Unlock()
	hold := false
	if undecided {
		_, listed := w.listed() // not under holdMu: Status takes w.mu, then holdMu
		hold = !listed && w.late != nil && w.late()
	}
	w.holdMu.Lock()
	if w.hold == holdUndecided {
		w.hold = holdOff
		if hold {
			w.hold = holdOn
			w.opts.Log.Info("the cluster answers after the start: its initial lists are held until every kind has listed, then folded at once")
		}
	}
	if w.hold == holdOn {
		w.holding = append(w.holding, c)
		w.holdMu.Unlock()
		return
	}
	w.holdMu.Unlock()
	w.feed.Push(c)
}

// held reports whether changes are held.
func (w *Watcher) held() bool {
	w.holdMu.Lock()
	defer w.holdMu.Unlock()
	return w.hold == holdOn
}

// releaseWhenListed hands the held changes to the feed, in one PushAll,
// once every served kind has listed and a discovery after that found no
// other kind to list (an API server that has just started serves its
// CRDs' groups a moment after its own); looked at every 25 ms. It returns
// then, or when ctx ends.
func (w *Watcher) releaseWhenListed(ctx context.Context) {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var listedAt uint64 // the discoveries when every kind had first listed
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.holdMu.Lock()
		state := w.hold
		w.holdMu.Unlock()
		if state == holdOff {
			return
		}
		n, listed := w.listed()
		if state == holdUndecided || !listed {
			listedAt = 0
			continue
		}
		if listedAt == 0 {
			listedAt = n
		}
		if n <= listedAt {
			continue
		}
		w.holdMu.Lock()
		w.feed.PushAll(append(w.holding, w.answering...))
		held := len(w.holding)
		w.holding, w.hold = nil, holdOff
		w.holdMu.Unlock()
		w.opts.Log.Info("initial lists folded at once", "changes", held)
		return
	}
}

// listed reports whether every served kind's informer has handed its
// initial list to the handler, the App kind's among them, and how many
// discoveries have answered.
func (w *Watcher) listed() (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.informers[projection.KindApp]; !ok {
		return w.discovered, false
	}
	for k, served := range w.served {
		if !served {
			continue
		}
		if inf := w.informers[k]; inf == nil || !inf.synced() {
			return w.discovered, false
		}
	}
	return w.discovered, true
}

type kindInformer struct {
	store *objectStore
	// ctrl runs the reflector into store and the handler.
	ctrl cache.Controller
	// listed is closed once the handler has been handed every object of
	// the initial list (the queue's HasSyncedChecker). Read without a lock
	// (synced): the queue holds its lock while the handler runs, and a
	// handler asks (push), so HasSynced there could deadlock two informers.
	listed <-chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// synced says whether the handler has been handed every object of the
// initial list.
func (ki *kindInformer) synced() bool {
	select {
	case <-ki.listed:
		return true
	default:
		return false
	}
}

// NewWatcher builds a watcher over the cluster cfg points at. With a nil cfg
// (no configuration could be resolved) it is a watcher of nothing that
// reports reason forever.
func NewWatcher(cfg *rest.Config, reason string, feed *Feed, opts Options) (*Watcher, error) {
	if opts.Discovery <= 0 {
		opts.Discovery = 10 * time.Second
	}
	if opts.Progress <= 0 {
		opts.Progress = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{opts: opts, feed: feed, reason: reason,
		informers: map[projection.Kind]*kindInformer{}, served: map[projection.Kind]bool{}, errs: map[projection.Kind]string{}}
	if cfg == nil {
		if w.reason == "" {
			w.reason = ErrNotConfigured.Error()
		}
		return w, nil
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	if cfg.Dial == nil {
		// A dialer of its own makes client-go build this cluster a
		// transport of its own (its cache keys transports by TLS settings
		// and dialer, not by server), shared by the cluster's clients
		// below. Without it, clusters of the same CA and credentials (the
		// aliases of one server) shared one, and their hundreds of watches
		// opened connection after connection: 5,700 at once at 500
		// clusters, a TLS handshake each.
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	proto := rest.CopyConfig(cfg)
	proto.ContentType = runtime.ContentTypeProtobuf
	proto.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	plain, plainProto := rest.CopyConfig(cfg), rest.CopyConfig(proto)
	plain.DisableCompression, plainProto.DisableCompression = true, true
	// Two transports a cluster: lists ask for compression, watches do not.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	plainHC, err := rest.HTTPClientFor(plain)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	core, err := kubernetes.NewForConfigAndClient(proto, hc)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	meta, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	w.dyn, w.disco, w.core, w.typed, w.meta = dyn, disco, core, core, meta
	if w.watchDyn, err = dynamic.NewForConfigAndClient(plain, plainHC); err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	if w.watchTyped, err = kubernetes.NewForConfigAndClient(plainProto, plainHC); err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	if w.watchMeta, err = metadata.NewForConfigAndClient(plain, plainHC); err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	return w, nil
}

// NewWatcherForClients builds a watcher over given clients: client-go's
// fakes in the demo and in tests. Every kind is read through dyn, in the
// unstructured form the projection decodes itself (a real server's built-in
// kinds are read typed, to the same summaries). core, used for pod logs
// only, may be nil.
func NewWatcherForClients(dyn dynamic.Interface, disco discovery.DiscoveryInterface, core kubernetes.Interface, feed *Feed, opts Options) *Watcher {
	w, _ := NewWatcher(nil, "", feed, opts)
	w.dyn, w.disco, w.core, w.reason = dyn, disco, core, ""
	if core == nil {
		w.reason = "pod logs are not available in this cluster"
	}
	return w
}

// Dynamic returns the watcher's dynamic client, nil when not configured.
func (w *Watcher) Dynamic() dynamic.Interface { return w.dyn }

// Run discovers the served kinds, runs an informer for each, and keeps
// looking for optional kinds (and stops the informer of a kind whose CRD was
// removed, deleting its objects from the fold). Until the projection is
// ready it logs the initial sync's progress every Options.Progress, then
// one ready line. It returns when ctx ends, after every informer and the
// progress reporter stopped.
func (w *Watcher) Run(ctx context.Context) {
	if w.dyn == nil {
		<-ctx.Done()
		return
	}
	w.mu.Lock()
	w.running = true
	w.mu.Unlock()
	defer w.stopAll()
	reported := make(chan struct{})
	defer func() { <-reported }()
	go func() {
		defer close(reported)
		w.reportProgress(ctx, time.Now(), w.opts.Progress)
	}()
	released := make(chan struct{})
	defer func() { <-released }()
	go func() {
		defer close(released)
		w.releaseWhenListed(ctx)
	}()
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		w.discover(ctx)
		wait.Reset(w.nextDiscovery())
	}
}

// DiscoveryRetry is the longest wait for the next discovery while the last
// one failed, the App CRD is not served or the initial lists are held: a
// cluster coming back, deployd's CRDs being installed, or a late cluster's
// rows are seen as soon as with one cluster.
const DiscoveryRetry = 10 * time.Second

// FleetDiscoveryRate is how many clusters' discoveries a second
// FleetDiscovery allows the whole fleet (each asks one request per
// group-version of the registry: nine).
const FleetDiscoveryRate = 10

// FleetDiscovery is the Discovery interval of each of n clusters: 10 s up
// to 100 clusters, then n/FleetDiscoveryRate seconds (50 s at 500), so
// the fleet's discovery requests stay near FleetDiscoveryRate × 9 a second
// however many clusters it has.
func FleetDiscovery(n int) time.Duration {
	return max(DiscoveryRetry, time.Duration(n)*time.Second/FleetDiscoveryRate)
}

// nextDiscovery is the wait before the next discovery: Options.Discovery
// within ±25 %, at most DiscoveryRetry while discovery fails, the App CRD
// is missing, or the initial lists are held (releaseWhenListed hands them
// on after a discovery that follows them).
func (w *Watcher) nextDiscovery() time.Duration {
	d := w.opts.Discovery
	w.holdMu.Lock()
	holding := w.hold != holdOff
	w.holdMu.Unlock()
	w.mu.Lock()
	if holding || w.discErr != "" || !w.served[projection.KindApp] {
		d = min(d, DiscoveryRetry)
	}
	w.mu.Unlock()
	return d*3/4 + rand.N(d/2+1)
}

// discover checks which registry kinds are served and starts or stops
// their informers.
func (w *Watcher) discover(ctx context.Context) {
	served, err := w.servedKinds()
	w.mu.Lock()
	w.discAt = time.Now()
	if err != nil {
		w.discErr = err.Error()
		if w.failedAt.IsZero() {
			w.failedAt = w.discAt
		}
		w.mu.Unlock()
		w.opts.Log.Warn("discovery failed; keeping the kinds known", "err", err)
		return
	}
	w.discErr, w.failedAt = "", time.Time{}
	w.discovered++
	askVersion := w.version == ""
	var start, stop []projection.Kind
	for _, ki := range projection.Registry() {
		_, running := w.informers[ki.Kind]
		switch {
		case served[ki.Kind] && !running:
			start = append(start, ki.Kind)
		case served[ki.Kind]:
			delete(w.missing, ki.Kind)
		case running:
			// An API server that has just started serves its CRDs'
			// groups a moment after its own: a kind is gone (its CRD
			// removed) once two discoveries in a row do not list it.
			if w.missing == nil {
				w.missing = map[projection.Kind]int{}
			}
			if w.missing[ki.Kind]++; w.missing[ki.Kind] < 2 {
				served[ki.Kind] = true
				continue
			}
			delete(w.missing, ki.Kind)
			stop = append(stop, ki.Kind)
		}
	}
	w.served = served
	w.mu.Unlock()
	if askVersion {
		if v, err := w.disco.ServerVersion(); err == nil {
			w.mu.Lock()
			w.version = v.GitVersion
			w.mu.Unlock()
		}
	}
	for _, k := range stop {
		w.stopKind(k)
	}
	for _, k := range start {
		w.startKind(ctx, k)
	}
}

// servedKinds asks discovery, one request per group-version, which registry
// kinds the API server serves.
func (w *Watcher) servedKinds() (map[projection.Kind]bool, error) {
	byGV := map[string][]projection.KindInfo{}
	for _, ki := range projection.Registry() {
		gv := ki.Version
		if ki.Group != "" {
			gv = ki.Group + "/" + ki.Version
		}
		byGV[gv] = append(byGV[gv], ki)
	}
	out := map[projection.Kind]bool{}
	var errs []error
	for gv, kinds := range byGV {
		list, err := w.disco.ServerResourcesForGroupVersion(gv)
		if err != nil {
			if isNotFound(err) {
				continue // the group-version is not served: none of its kinds
			}
			errs = append(errs, fmt.Errorf("%s: %w", gv, err))
			continue
		}
		for _, r := range list.APIResources {
			for _, ki := range kinds {
				if r.Name == ki.Resource {
					out[ki.Kind] = true
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func (w *Watcher) startKind(ctx context.Context, k projection.Kind) {
	gvr := k.GVR()
	var lw cache.ListerWatcher
	var example runtime.Object
	if w.typed != nil {
		if typed, ex := builtinSource(w.typed, w.meta, k); typed != nil {
			if w.watchTyped != nil {
				plain, _ := builtinSource(w.watchTyped, w.watchMeta, k)
				typed.WatchFuncWithContext = plain.WatchFuncWithContext
			}
			lw, example = w.counted(k, typed), ex
		}
	}
	if lw == nil {
		// As dynamicinformer builds it, with the lists and watches counted.
		res := w.dyn.Resource(gvr).Namespace(metav1.NamespaceAll)
		watchRes := res
		if w.watchDyn != nil {
			watchRes = w.watchDyn.Resource(gvr).Namespace(metav1.NamespaceAll)
		}
		lw = cache.ToListWatcherWithWatchListSemantics(w.counted(k, &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return res.List(ctx, o)
			},
			WatchFuncWithContext: watchRes.Watch,
		}), w.dyn)
		example = &unstructured.Unstructured{}
	}
	w.counts[k].starts.Add(1)
	undecoded := func(obj metav1.Object, err error) {
		w.opts.Log.Debug("object not decoded", "kind", k.String(), "namespace", obj.GetNamespace(), "name", obj.GetName(), "err", err)
	}
	kctx, cancel := context.WithCancel(ctx)
	ki := &kindInformer{cancel: cancel, done: make(chan struct{})}
	ki.store, ki.ctrl = newInformer(lw, example, qualified(decoder(k, w.opts.Namespaces.Watched, undecoded), w.opts.Cluster),
		w.handler(k), func(_ context.Context, _ *cache.Reflector, err error) {
			w.mu.Lock()
			w.errs[k] = err.Error()
			w.mu.Unlock()
			w.opts.Log.Warn("watch failed; retrying", "kind", k.String(), "err", err)
		})
	ki.listed = ki.ctrl.HasSyncedChecker().Done()
	w.mu.Lock()
	w.informers[k] = ki
	w.mu.Unlock()
	go func() {
		defer close(ki.done)
		ki.ctrl.RunWithContext(kctx)
	}()
	w.opts.Log.Info("watching", "kind", k.String(), "resource", gvr.String())
}

// stopKind stops the informer of a kind no longer served and deletes its
// objects from the fold: they are gone with their CRD.
func (w *Watcher) stopKind(k projection.Kind) {
	w.mu.Lock()
	ki := w.informers[k]
	delete(w.informers, k)
	delete(w.errs, k)
	w.mu.Unlock()
	if ki == nil {
		return
	}
	ki.cancel()
	<-ki.done
	for _, st := range ki.store.List() {
		if st.fold {
			w.push(projection.Change{Op: projection.Delete, Object: &projection.Object{Kind: k, Namespace: st.obj.Namespace, Name: st.obj.Name}})
		}
	}
	w.opts.Log.Info("stopped watching: no longer served", "kind", k.String())
}

func (w *Watcher) stopAll() {
	w.mu.Lock()
	all := w.informers
	w.informers = map[projection.Kind]*kindInformer{}
	w.running = false
	w.mu.Unlock()
	for _, ki := range all {
		ki.cancel()
	}
	for _, ki := range all {
		<-ki.done
	}
}

// handler converts notifications into changes; the transform already
// decoded the objects, so it only enqueues.
func (w *Watcher) handler(k projection.Kind) cache.ResourceEventHandler {
	upsert := func(obj any) {
		if st, ok := obj.(*stored); ok && st.fold {
			w.push(projection.Change{Op: projection.Upsert, Object: &st.obj})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, obj any) { upsert(obj) },
		DeleteFunc: func(obj any) {
			var ns, name, rv string
			switch t := obj.(type) {
			case *stored:
				// The watch's final state carries the deletion's
				// resourceVersion: the fold's position moves past it.
				ns, name, rv = t.obj.Namespace, t.obj.Name, t.obj.ResourceVersion
			case cache.DeletedFinalStateUnknown:
				// The watch missed the deletion; the key is all we trust.
				var err error
				if ns, name, err = cache.SplitMetaNamespaceKey(t.Key); err != nil {
					return
				}
			default:
				return
			}
			if !w.watched(ns) {
				return
			}
			w.push(projection.Change{Op: projection.Delete, Object: &projection.Object{Kind: k, Namespace: ns, Name: name, ResourceVersion: rv}})
		},
	}
}

// KindStatus is the state of one registry kind.
type KindStatus struct {
	Kind     string `json:"kind"`
	Served   bool   `json:"served"`
	Watching bool   `json:"watching"`
	Synced   bool   `json:"synced"`
	Error    string `json:"error,omitempty"`
}

// Status is what the watcher can tell about itself.
type Status struct {
	// Configured: a cluster configuration was resolved.
	Configured bool
	// Reachable: the last discovery answered.
	Reachable bool
	// AppCRD: the API server serves hanzo.ai/v1 apps.
	AppCRD bool
	// CDCRD: the API server serves CD Applications (apps.hanzo.ai).
	CDCRD bool
	// Synced: every running informer has listed, the App kind's runs, and
	// the projection holds everything the lists returned.
	Synced bool
	// Reason says why the watcher is not ready, "" when it is.
	Reason string
	// Progress is the initial sync's progress in words while it runs
	// ("syncing: 12 of 17 kinds listed, 48211 objects folded"), "" once
	// ready or while something else stops it.
	Progress string
	// CheckedAt is when discovery last asked the API server (zero before
	// it has).
	CheckedAt time.Time
	// FailedSince is when the API server stopped answering discovery
	// (zero while it answers); Failure is what the last attempt said.
	FailedSince time.Time
	Failure     string
	// KindsListed of KindsServed have listed; Folded changes have been
	// folded by the writer.
	KindsListed, KindsServed int
	Folded                   uint64
	Kinds                    []KindStatus
}

// Ready reports whether the projection reflects the cluster.
func (s Status) Ready() bool { return s.Configured && s.AppCRD && s.Synced }

// Status reports the watcher's state. Safe for concurrent use.
func (w *Watcher) Status() Status {
	if w.dyn == nil {
		return Status{Reason: w.reason}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Status{Configured: true, Reachable: w.discErr == "" && len(w.served) > 0, CheckedAt: w.discAt,
		FailedSince: w.failedAt, Failure: w.discErr,
		AppCRD: w.served[projection.KindApp], CDCRD: w.served[projection.KindCDApplication], Synced: true}
	for _, ki := range projection.Registry() {
		ks := KindStatus{Kind: ki.Name, Served: w.served[ki.Kind], Error: w.errs[ki.Kind]}
		if inf := w.informers[ki.Kind]; inf != nil {
			ks.Watching = true
			ks.Synced = inf.synced()
			if ks.Synced {
				ks.Error = ""
			}
		}
		if ks.Served && !ks.Synced {
			st.Synced = false
		}
		st.Kinds = append(st.Kinds, ks)
	}
	if _, ok := w.informers[projection.KindApp]; !ok {
		st.Synced = false
	}
	if st.Synced && w.held() {
		st.Synced = false // the held lists have not reached the feed yet
	}
	// Every initial list has reached the feed; ready waits until the
	// writer has folded all of it, so a ready deployd never serves a
	// fleet half loaded.
	behind := uint64(0)
	if st.Synced && !w.caughtUp {
		if !w.marked {
			w.syncMark, w.marked = w.feed.Pushed(), true
		}
		if applied := w.feed.Applied(); applied >= w.syncMark {
			w.caughtUp = true
		} else {
			st.Synced, behind = false, w.syncMark-applied
		}
	}
	sort.Slice(st.Kinds, func(i, j int) bool { return st.Kinds[i].Kind < st.Kinds[j].Kind })
	st.KindsListed, st.KindsServed, st.Folded = w.syncProgress()
	syncing := progressText(st.KindsListed, st.KindsServed, st.Folded)
	switch {
	case !w.running:
		st.Reason = "the watch has not started"
	case w.discErr != "" && len(w.served) == 0:
		st.Reason = "the Kubernetes API server cannot be reached"
	case !st.AppCRD:
		st.Reason = "the App CRD (apps.hanzo.ai) is not installed"
	case behind > 0:
		st.Reason = fmt.Sprintf("folding the initial lists (%d objects to go)", behind)
		st.Progress = syncing
	case !st.Synced:
		st.Reason = "the caches are not yet synced"
		st.Progress = syncing
		for _, ks := range st.Kinds {
			if ks.Served && !ks.Synced && ks.Error != "" {
				st.Reason = "listing " + ks.Kind + " failed; retrying"
				break
			}
		}
	}
	return st
}

// Cached returns the summaries the informer of a kind holds for watched
// namespaces (the very objects the projection folded); nil when the kind is
// not watched.
func (w *Watcher) Cached(k projection.Kind) []*projection.Object {
	w.mu.Lock()
	ki := w.informers[k]
	w.mu.Unlock()
	if ki == nil {
		return nil
	}
	var out []*projection.Object
	for _, st := range ki.store.List() {
		if st.fold {
			out = append(out, &st.obj)
		}
	}
	return out
}
