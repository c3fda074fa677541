package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// Defaults of Options.
const (
	DefaultDeadlineSteps = 12
	DefaultCrashEvery    = 40
	DefaultReleaseEvery  = 25
)

// Options configure a Simulator.
type Options struct {
	// Seed and Apps choose the generated fleet (fleet.Generate); Apps ≤ 0
	// means fleet.DefaultSize.
	Seed int64
	Apps int
	// Now stamps times (default time.Now). The generated fleet is shifted
	// so that its Epoch is Now() at New.
	Now func() time.Time
	Log *slog.Logger
	// DeadlineSteps is how many steps a rollout may take before its
	// Deployment reports ProgressDeadlineExceeded (default 12).
	DeadlineSteps int
	// CrashEvery is how many steps after a crash loop ended the
	// crash-looping App's next one starts; 0 means never again, as tests
	// want (the demo uses DefaultCrashEvery).
	CrashEvery int
	// ReleaseEvery: every this many steps a new patch release of one App,
	// chosen from the seed, is declared (its spec.image.tag patched, as a
	// release pipeline would); 0 means never (the demo uses
	// DefaultReleaseEvery).
	ReleaseEvery int
	// Workers bounds the requests in flight while loading.
	Workers int
}

// Simulator runs a fleet. See the package documentation.
type Simulator struct {
	dyn    dynamic.Interface
	opts   Options
	log    *slog.Logger
	loader *fleet.Loader
	rng    *rand.Rand

	mu      sync.Mutex
	step    int
	apps    map[types.NamespacedName]*appSim
	bad     map[string]bool // images that cannot be pulled
	written map[string]*writtenObj
	// declare, when set, declares a release instead of patching the App.
	declare func(ctx context.Context, namespace, name, tag string) error
}

// DeclareReleasesWith makes the simulator's release pipeline declare each
// new release through f (a commit to the manifest repository, when an
// engine applies it) instead of patching the App in the cluster. f runs in
// its own goroutine, outside the step.
func (s *Simulator) DeclareReleasesWith(f func(ctx context.Context, namespace, name, tag string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.declare = f
}

// appSim is one App: what it declares and the state the simulated
// controllers made of it.
type appSim struct {
	app fleet.App
	st  fleet.State
	// What the last poll read from the cluster.
	live liveApp
	// rolloutStep is the step the current rollout started at.
	rolloutStep int
	// quiet counts the steps without a crash-looping pod (FaultCrashLoop).
	quiet int
	// keys are the written objects of this App.
	keys map[string]bool
}

// liveApp is what the simulator reads of an App and its Deployment.
type liveApp struct {
	generation  int64
	tag         string
	replicas    int32
	sync        string
	restartedAt string
}

// writtenObj is an object as the simulator last wrote it, and the
// generation the API server answered with.
type writtenObj struct {
	obj        map[string]any
	generation int64
}

// New generates the fleet of opts, loads it at rest through dyn (a
// FakeCluster's, or a real API server's built from fleet.FastConfig), and
// returns a simulator at step 0.
func New(ctx context.Context, dyn dynamic.Interface, opts Options) (*Simulator, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.DeadlineSteps <= 0 {
		opts.DeadlineSteps = DefaultDeadlineSteps
	}
	s := &Simulator{
		dyn: dyn, opts: opts, log: opts.Log, loader: fleet.NewLoader(dyn),
		rng:     rand.New(rand.NewPCG(uint64(opts.Seed), 0x73696d)),
		apps:    map[types.NamespacedName]*appSim{},
		bad:     map[string]bool{},
		written: map[string]*writtenObj{},
	}
	s.loader.Workers = opts.Workers
	apps := fleet.Generate(opts.Seed, opts.Apps)
	if shift := opts.Now().Sub(fleet.Epoch).Truncate(time.Second); shift != 0 {
		apps = fleet.Shift(apps, shift)
	}
	var objs []*unstructured.Unstructured
	for _, app := range apps {
		var rendered []*unstructured.Unstructured
		if app.Kind == fleet.KindApp {
			a := &appSim{app: app, st: fleet.AtRest(app), keys: map[string]bool{}, rolloutStep: -opts.DeadlineSteps}
			a.live = liveApp{generation: a.st.Generation, tag: app.Tag, replicas: app.Replicas}
			s.apps[types.NamespacedName{Namespace: app.Namespace, Name: app.Name}] = a
			if app.Fault == fleet.FaultImagePull {
				s.bad[app.Image()] = true
			}
			rendered = fleet.Render(app, a.st)
			for _, u := range rendered {
				a.keys[objKey(u)] = true
			}
		} else {
			rendered = fleet.Render(app)
		}
		for _, u := range rendered {
			s.written[objKey(u)] = &writtenObj{obj: u.Object}
		}
		objs = append(objs, rendered...)
	}
	began := time.Now()
	if err := s.loader.Load(ctx, objs); err != nil {
		return nil, fmt.Errorf("load the fleet: %w", err)
	}
	s.log.Info("simulated fleet loaded", "apps", len(s.apps), "objects", len(objs), "seed", opts.Seed,
		"took", time.Since(began).Round(time.Millisecond))
	return s, nil
}

// Run steps the simulation every pace until ctx ends. A failed step is
// logged and the next one tried.
func (s *Simulator) Run(ctx context.Context, pace time.Duration) {
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := s.Step(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("simulation step failed; trying again at the next", "err", err)
		}
	}
}

// StepCount is the number of steps taken.
func (s *Simulator) StepCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// App returns an App of the fleet as the simulator knows it: what it
// declares and its state.
func (s *Simulator) App(namespace, name string) (fleet.App, fleet.State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[types.NamespacedName{Namespace: namespace, Name: name}]
	if a == nil {
		return fleet.App{}, fleet.State{}, false
	}
	return a.app.Clone(), a.st.Clone(), true
}

// Apps returns the Apps of the fleet, sorted by namespace and name.
func (s *Simulator) Apps() []fleet.App {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]fleet.App, 0, len(s.apps))
	for _, k := range s.sortedKeys() {
		out = append(out, s.apps[k].app.Clone())
	}
	return out
}

func (s *Simulator) sortedKeys() []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(s.apps))
	for k := range s.apps {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].Name < keys[j].Name
	})
	return keys
}

// Step advances the simulation by one step: read what others wrote, let
// the operator, the controllers and the kubelet act, write the result.
func (s *Simulator) Step(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.clearActions()
	s.step++
	now := s.opts.Now().UTC().Truncate(time.Second)
	if err := s.observe(ctx, now); err != nil {
		return err
	}
	for _, k := range s.sortedKeys() {
		s.advance(s.apps[k], now)
	}
	err := s.sync(ctx)
	if s.opts.ReleaseEvery > 0 && s.step%s.opts.ReleaseEvery == 0 {
		err = errors.Join(err, s.release(ctx))
	}
	return err
}

// clearActions empties the request record of client-go's fakes.
func (s *Simulator) clearActions() {
	if c, ok := s.dyn.(interface{ ClearActions() }); ok {
		c.ClearActions()
	}
}

// observe reads the Apps and Deployments: spec changes, sync requests and
// rolling restarts made by others, Apps created (adopted) or deleted.
func (s *Simulator) observe(ctx context.Context, now time.Time) error {
	apps, err := s.dyn.Resource(projection.KindApp.GVR()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list apps: %w", err)
	}
	seen := map[types.NamespacedName]bool{}
	for i := range apps.Items {
		u := &apps.Items[i]
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		k := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
		seen[k] = true
		a := s.apps[k]
		if a == nil {
			a = s.adopt(u, now)
			s.apps[k] = a
		}
		tag, _, _ := unstructured.NestedString(u.Object, "spec", "image", "tag")
		replicas, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found {
			replicas = 1
		}
		a.live.generation, a.live.tag, a.live.replicas = u.GetGeneration(), tag, int32(replicas)
		a.live.sync = u.GetAnnotations()[fleet.AnnotationSyncAt]
	}
	for _, k := range s.sortedKeys() {
		if !seen[k] {
			s.forget(ctx, k)
		}
	}
	deployments, err := s.dyn.Resource(projection.KindDeployment.GVR()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	for i := range deployments.Items {
		u := &deployments.Items[i]
		a := s.apps[types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}]
		if a == nil {
			continue
		}
		a.live.restartedAt, _, _ = unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", fleet.AnnotationRestartedAt)
		a.st.DeploymentGeneration = u.GetGeneration()
		if w := s.written[objKey(u)]; w != nil {
			w.generation = u.GetGeneration()
		}
	}
	return nil
}

// adopt takes on an App someone else created: the operator renders its
// children from nothing.
func (s *Simulator) adopt(u *unstructured.Unstructured, now time.Time) *appSim {
	app := fleet.App{Kind: fleet.KindApp, Namespace: u.GetNamespace(), Name: u.GetName(), Created: u.GetCreationTimestamp().UTC(),
		Org: u.GetLabels()[fleet.LabelOrg], Project: u.GetLabels()[fleet.LabelPartOf], Port: 8000}
	app.Repository, _, _ = unstructured.NestedString(u.Object, "spec", "image", "repository")
	app.Role, _, _ = unstructured.NestedString(u.Object, "spec", "role")
	if p, ok, _ := unstructured.NestedInt64(u.Object, "spec", "port"); ok && p > 0 {
		app.Port = int32(p)
	}
	if on, _, _ := unstructured.NestedBool(u.Object, "spec", "ingress", "enabled"); on {
		app.Hosts, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "ingress", "hosts")
		app.TLS = true
	}
	if app.Created.IsZero() {
		app.Created = now
	}
	s.loader.Remember(types.UID(fleet.UID(app.Namespace, "App", app.Name)), u.GetUID())
	a := &appSim{app: app, keys: map[string]bool{}, st: fleet.State{DeploymentGeneration: 1, ReadySince: now}}
	key := objKey(u)
	s.written[key] = &writtenObj{obj: u.DeepCopy().Object, generation: u.GetGeneration()}
	a.keys[key] = true
	s.log.Info("adopted a new App", "namespace", app.Namespace, "app", app.Name)
	return a
}

// forget removes a deleted App and, as the garbage collector would, what it
// owned.
func (s *Simulator) forget(ctx context.Context, k types.NamespacedName) {
	a := s.apps[k]
	delete(s.apps, k)
	keys := make([]string, 0, len(a.keys))
	for key := range a.keys {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return deleteOrder(keys[i]) < deleteOrder(keys[j]) })
	for _, key := range keys {
		w := s.written[key]
		delete(s.written, key)
		if w == nil || strings.HasPrefix(key, "App/") {
			continue
		}
		if err := s.delete(ctx, &unstructured.Unstructured{Object: w.obj}); err != nil {
			s.log.Warn("delete an object of a deleted App", "object", key, "err", err)
		}
	}
	s.log.Info("App deleted; its objects removed", "namespace", k.Namespace, "app", k.Name)
}

// release declares a new patch release of one healthy App, as a release
// pipeline would, by patching its spec.image.tag.
func (s *Simulator) release(ctx context.Context) error {
	var candidates []*appSim
	for _, k := range s.sortedKeys() {
		if a := s.apps[k]; a.app.Fault == fleet.FaultNone && a.app.Replicas > 0 && fleet.RolloutComplete(&a.app, &a.st) {
			candidates = append(candidates, a)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	a := candidates[s.rng.IntN(len(candidates))]
	tag := nextPatch(a.app.Tag)
	if tag == "" {
		return nil
	}
	if s.declare != nil {
		declare, ns, name := s.declare, a.app.Namespace, a.app.Name
		go func() {
			if err := declare(ctx, ns, name, tag); err != nil && ctx.Err() == nil {
				s.log.Warn("declare a release", "namespace", ns, "app", name, "tag", tag, "err", err)
				return
			}
			s.log.Info("new release declared", "namespace", ns, "app", name, "tag", tag)
		}()
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"image":{"tag":%q}}}`, tag)
	_, err := s.dyn.Resource(projection.KindApp.GVR()).Namespace(a.app.Namespace).
		Patch(ctx, a.app.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("declare release %s of %s/%s: %w", tag, a.app.Namespace, a.app.Name, err)
	}
	s.log.Info("new release declared", "namespace", a.app.Namespace, "app", a.app.Name, "tag", tag)
	return nil
}

// nextPatch is v1.2.4 for v1.2.3; "" for a tag that is not vX.Y.Z.
func nextPatch(tag string) string {
	parts := strings.Split(strings.TrimPrefix(tag, "v"), ".")
	if len(parts) != 3 || !strings.HasPrefix(tag, "v") {
		return ""
	}
	p, err := strconv.Atoi(parts[2])
	if err != nil {
		return ""
	}
	return fmt.Sprintf("v%s.%s.%d", parts[0], parts[1], p+1)
}
