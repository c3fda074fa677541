package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hanzoai/deploy/gitops"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// state is the engine's status as every replica reports it: kept in the
// cluster (a ConfigMap beside the Lease) by the leader, read back by all.
type state struct {
	Leader    *leaderRecord            `json:"leader,omitempty"`
	Revision  string                   `json:"revision,omitempty"`
	Runs      int64                    `json:"runs"`
	LastRun   *gitops.EngineRun        `json:"lastRun,omitempty"`
	NextRunAt *time.Time               `json:"nextRunAt,omitempty"`
	Stale     *gitops.EngineStale      `json:"stale,omitempty"`
	Suspended *gitops.EngineSuspension `json:"suspended,omitempty"`
}

// leaderRecord is the leader as the state records it, with the URL the
// other replicas forward to (the Lease holds only the identity).
type leaderRecord struct {
	Identity string    `json:"identity"`
	URL      string    `json:"url"`
	Since    time.Time `json:"since"`
}

func (s state) clone() state {
	c := s
	if s.Leader != nil {
		l := *s.Leader
		c.Leader = &l
	}
	if s.LastRun != nil {
		r := *s.LastRun
		c.LastRun = &r
	}
	if s.NextRunAt != nil {
		t := *s.NextRunAt
		c.NextRunAt = &t
	}
	if s.Stale != nil {
		st := *s.Stale
		c.Stale = &st
	}
	if s.Suspended != nil {
		su := *s.Suspended
		c.Suspended = &su
	}
	return c
}

// stateKey is the ConfigMap's key holding the state as JSON.
const stateKey = "status.json"

// stateStore keeps the state in a ConfigMap: the leader writes it, every
// replica watches that one object (a field selector on its name).
type stateStore struct {
	cs              kubernetes.Interface
	namespace, name string

	mu     sync.Mutex
	cached *state // the last version the watch delivered; nil before one
	synced chan struct{}
}

func newStateStore(cs kubernetes.Interface, namespace, name string) *stateStore {
	return &stateStore{cs: cs, namespace: namespace, name: name, synced: make(chan struct{})}
}

// watch keeps the cached state current until ctx ends.
func (s *stateStore) watch(ctx context.Context) {
	lw := cache.NewListWatchFromClient(s.cs.CoreV1().RESTClient(), "configmaps", s.namespace,
		fields.OneTermEqualSelector("metadata.name", s.name))
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.observe(o) },
			UpdateFunc: func(_, o any) { s.observe(o) },
			DeleteFunc: func(any) { s.set(nil) },
		},
	})
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
			close(s.synced)
		}
	}()
	ctrl.RunWithContext(ctx)
}

func (s *stateStore) observe(o any) {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return
	}
	st, err := decodeState(cm)
	if err != nil {
		return // written by someone else: the leader overwrites it
	}
	s.set(&st)
}

func (s *stateStore) set(st *state) {
	s.mu.Lock()
	s.cached = st
	s.mu.Unlock()
}

// get is the cached state (zero before the watch delivered one).
func (s *stateStore) get() state {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached == nil {
		return state{}
	}
	return s.cached.clone()
}

func decodeState(cm *corev1.ConfigMap) (state, error) {
	var st state
	raw, ok := cm.Data[stateKey]
	if !ok {
		return st, nil
	}
	err := json.Unmarshal([]byte(raw), &st)
	return st, err
}

// read reads the state from the API server (the leader's first act: it
// carries on from the last leader's runs, suspension and staleness).
func (s *stateStore) read(ctx context.Context) (state, error) {
	cm, err := s.cs.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return state{}, nil
	}
	if err != nil {
		return state{}, fmt.Errorf("read the engine's state (ConfigMap %s/%s): %s", s.namespace, s.name, safeAPIError(err))
	}
	st, err := decodeState(cm)
	if err != nil {
		return state{}, nil // unreadable: start afresh, the write replaces it
	}
	return st, nil
}

// write stores the state (create, or update over whatever is there: the
// leader is its one writer).
func (s *stateStore) write(ctx context.Context, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cms := s.cs.CoreV1().ConfigMaps(s.namespace)
	for attempt := 0; attempt < 3; attempt++ {
		cm, err := cms.Get(ctx, s.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "deployd", "app.kubernetes.io/component": "engine"}}}
			cm.Data = map[string]string{stateKey: string(b)}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		} else if err == nil {
			if cm.Data[stateKey] == string(b) {
				return nil
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[stateKey] = string(b)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
			if apierrors.IsConflict(err) {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("write the engine's state (ConfigMap %s/%s): %s", s.namespace, s.name, safeAPIError(err))
		}
		s.set(&st)
		return nil
	}
	return fmt.Errorf("write the engine's state (ConfigMap %s/%s): it kept changing", s.namespace, s.name)
}
