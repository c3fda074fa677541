package cluster

import (
	"context"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/hanzoai/deploy/projection"
)

// Built-in kinds are read in protobuf through typed clients, and the kinds
// the fold reads only the metadata of (ConfigMap, PodDisruptionBudget) as
// metadata alone: the API server encodes, and deployd decodes, a fraction of
// what JSON into unstructured maps costs, and a ConfigMap's data never
// crosses the wire. CRDs have no protobuf encoding and stay on the dynamic
// client. decodeBuiltin reads exactly what projection.DecodeKind reads from
// the same object in JSON; a property test holds the two together.

// builtinSource returns the list-watch and the object type of a kind read
// through the typed or the metadata client, or nil for a kind read through
// the dynamic client.
func builtinSource(cs kubernetes.Interface, md metadata.Interface, k projection.Kind) (*cache.ListWatch, runtime.Object) {
	switch k {
	case projection.KindDeployment:
		c := cs.AppsV1().Deployments(metav1.NamespaceAll)
		return listWatch(c.List, c.Watch), &appsv1.Deployment{}
	case projection.KindStatefulSet:
		c := cs.AppsV1().StatefulSets(metav1.NamespaceAll)
		return listWatch(c.List, c.Watch), &appsv1.StatefulSet{}
	case projection.KindReplicaSet:
		c := cs.AppsV1().ReplicaSets(metav1.NamespaceAll)
		return listWatch(c.List, c.Watch), &appsv1.ReplicaSet{}
	case projection.KindPod:
		c := cs.CoreV1().Pods(metav1.NamespaceAll)
		return listWatch(c.List, c.Watch), &corev1.Pod{}
	case projection.KindService:
		c := cs.CoreV1().Services(metav1.NamespaceAll)
		return listWatch(c.List, c.Watch), &corev1.Service{}
	case projection.KindIngress:
		c := cs.NetworkingV1().Ingresses(metav1.NamespaceAll)
		return listWatch(c.List, c.Watch), &networkingv1.Ingress{}
	case projection.KindHPA:
		c := cs.AutoscalingV2().HorizontalPodAutoscalers(metav1.NamespaceAll)
		return listWatch(c.List, c.Watch), &autoscalingv2.HorizontalPodAutoscaler{}
	case projection.KindConfigMap, projection.KindPDB:
		c := md.Resource(k.GVR()).Namespace(metav1.NamespaceAll)
		return listWatch(c.List, c.Watch), &metav1.PartialObjectMetadata{}
	}
	return nil, nil
}

func listWatch[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error), watch func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) },
		WatchFuncWithContext: watch,
	}
}

// decodeBuiltin summarizes a typed object (or an object's metadata) of kind
// k; ok is false for a type that is not one of k's.
func decodeBuiltin(k projection.Kind, obj metav1.Object) (*projection.Object, bool) {
	o := new(projection.Object)
	return o, decodeBuiltinInto(k, obj, o)
}

// identity returns an object's name, UID and resourceVersion as parts of
// one string. The protobuf decoder gives each its own allocation, and a
// summary keeps all three for as long as it is held: one allocation in
// place of three is 1.8 million fewer objects for every collection to
// mark at 500 clusters.
func identity(name, uid, rv string) (string, string, string) {
	all := name + uid + rv
	i, j := len(name), len(name)+len(uid)
	return all[:i], all[i:j], all[j:]
}

// decodeBuiltinInto is decodeBuiltin writing into o, which an informer's
// stored object holds by value (one allocation an object, not two).
func decodeBuiltinInto(k projection.Kind, obj metav1.Object, o *projection.Object) (ok bool) {
	name, uid, rv := identity(obj.GetName(), string(obj.GetUID()), obj.GetResourceVersion())
	*o = projection.Object{
		Kind:            k,
		Namespace:       projection.Intern(obj.GetNamespace()),
		Name:            name,
		UID:             uid,
		ResourceVersion: rv,
		Generation:      obj.GetGeneration(),
		Created:         unix(obj.GetCreationTimestamp()),
		Deleting:        obj.GetDeletionTimestamp() != nil,
	}
	if p, isPod := obj.(*corev1.Pod); isPod {
		o.Spec, ok = podSummary(o, p), k == projection.KindPod
		return ok
	}
	o.Labels = projection.MakeLabels(obj.GetLabels())
	o.Owners = owners(obj.GetOwnerReferences())
	ann := obj.GetAnnotations()
	switch t := obj.(type) {
	case *metav1.PartialObjectMetadata:
		ok = k == projection.KindConfigMap || k == projection.KindPDB
	case *appsv1.Deployment:
		w := workload(t.Spec.Replicas, t.Spec.Selector, &t.Spec.Template, ann)
		w.Paused = t.Spec.Paused
		st := &t.Status
		w.ObservedGeneration, w.StatusReplicas, w.UpdatedReplicas = st.ObservedGeneration, st.Replicas, st.UpdatedReplicas
		w.ReadyReplicas, w.AvailableReplicas = st.ReadyReplicas, st.AvailableReplicas
		w.Conditions = conditions(st.Conditions, func(c appsv1.DeploymentCondition) projection.Condition {
			return projection.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		})
		o.Spec, ok = w, k == projection.KindDeployment
	case *appsv1.StatefulSet:
		w := workload(t.Spec.Replicas, t.Spec.Selector, &t.Spec.Template, ann)
		w.UpdateStrategy = string(t.Spec.UpdateStrategy.Type)
		if ru := t.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			w.RollingUpdate = true
			if ru.Partition != nil {
				p := *ru.Partition
				w.Partition = &p
			}
		}
		st := &t.Status
		w.ObservedGeneration, w.StatusReplicas, w.UpdatedReplicas = st.ObservedGeneration, st.Replicas, st.UpdatedReplicas
		w.ReadyReplicas, w.AvailableReplicas, w.CurrentReplicas = st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas
		w.CurrentRevision, w.UpdateRevision = st.CurrentRevision, st.UpdateRevision
		w.Conditions = conditions(st.Conditions, func(c appsv1.StatefulSetCondition) projection.Condition {
			return projection.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		})
		o.Spec, ok = w, k == projection.KindStatefulSet
	case *appsv1.ReplicaSet:
		w := workload(t.Spec.Replicas, t.Spec.Selector, &t.Spec.Template, ann)
		st := &t.Status
		w.ObservedGeneration, w.StatusReplicas = st.ObservedGeneration, st.Replicas
		w.ReadyReplicas, w.AvailableReplicas = st.ReadyReplicas, st.AvailableReplicas
		w.Conditions = conditions(st.Conditions, func(c appsv1.ReplicaSetCondition) projection.Condition {
			return projection.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		})
		o.Spec, ok = w, k == projection.KindReplicaSet
	case *corev1.Service:
		var lb []string
		for _, e := range t.Status.LoadBalancer.Ingress {
			lb = projection.AppendAddress(lb, e.Hostname, e.IP)
		}
		o.Spec = &projection.ServiceSpec{Type: string(t.Spec.Type), Selector: projection.MakeLabels(t.Spec.Selector), LoadBalancer: lb}
		ok = k == projection.KindService
	case *networkingv1.Ingress:
		in := &projection.IngressSpec{TLS: len(t.Spec.TLS) > 0}
		for _, e := range t.Status.LoadBalancer.Ingress {
			in.LoadBalancer = projection.AppendAddress(in.LoadBalancer, e.Hostname, e.IP)
		}
		backend := func(b *networkingv1.IngressBackend) {
			if b != nil && b.Service != nil {
				in.Services = projection.AppendService(in.Services, b.Service.Name)
			}
		}
		backend(t.Spec.DefaultBackend)
		for _, r := range t.Spec.Rules {
			if r.Host != "" {
				in.Hosts = append(in.Hosts, r.Host)
			}
			if r.HTTP != nil {
				for i := range r.HTTP.Paths {
					backend(&r.HTTP.Paths[i].Backend)
				}
			}
		}
		o.Spec, ok = in, k == projection.KindIngress
	case *autoscalingv2.HorizontalPodAutoscaler:
		o.Spec = &projection.HPASpec{Conditions: conditions(t.Status.Conditions, func(c autoscalingv2.HorizontalPodAutoscalerCondition) projection.Condition {
			return projection.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		})}
		ok = k == projection.KindHPA
	}
	return ok
}

// workload reads what Deployments, StatefulSets and ReplicaSets share.
func workload(replicas *int32, sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, ann map[string]string) *projection.WorkloadSpec {
	w := &projection.WorkloadSpec{
		Selector:    selector(sel),
		Containers:  containers(tmpl.Spec.Containers),
		Revision:    ann[projection.AnnotationRevision],
		RestartedAt: tmpl.Annotations[projection.AnnotationRestartedAt],
	}
	if replicas != nil {
		r := *replicas
		w.Replicas = &r
	}
	if id, err := strconv.ParseInt(w.Revision, 10, 64); err == nil && id > 0 {
		w.RevisionID = id
	}
	return w
}

// podSummary fills in a pod's labels and owner references and returns its
// PodSpec. A pod's labels, owner references, containers and container
// statuses are most often those of a sibling (a pod of the same
// controller) decoded just before, in a list (ordered by name) or in a
// rollout: it then holds the sibling's slices, not copies of its own
// (siblingSlices).
func podSummary(o *projection.Object, p *corev1.Pod) *projection.PodSpec {
	owner := controllerUID(p.OwnerReferences)
	var sib podSlices
	if owner != "" {
		sib = siblings.get(owner)
	}
	mine := sib
	if labels := p.Labels; !sib.labels.EqualMap(labels) {
		mine.labels = projection.MakeLabels(labels)
	}
	if !ownersEqual(p.OwnerReferences, sib.owners) {
		mine.owners = owners(p.OwnerReferences)
	}
	if !containersEqual(p.Spec.Containers, sib.containers) {
		mine.containers = containers(p.Spec.Containers)
	}
	if !statusesEqual(p.Status.InitContainerStatuses, sib.init) {
		mine.init = containerStatuses(p.Status.InitContainerStatuses)
	}
	if !statusesEqual(p.Status.ContainerStatuses, sib.statuses) {
		mine.statuses = containerStatuses(p.Status.ContainerStatuses)
	}
	if owner != "" && !mine.same(sib) {
		siblings.put(mine)
	}
	o.Labels, o.Owners = mine.labels, mine.owners
	return pod(p, mine)
}

func pod(p *corev1.Pod, sl podSlices) *projection.PodSpec {
	out := &projection.PodSpec{
		RestartPolicy: projection.Intern(string(p.Spec.RestartPolicy)),
		NodeName:      projection.Intern(p.Spec.NodeName),
		Containers:    sl.containers,
		Phase:         projection.Intern(string(p.Status.Phase)),
		Message:       p.Status.Message,
		InitStatuses:  sl.init,
		Statuses:      sl.statuses,
		PodIP:         p.Status.PodIP,
	}
	if p.Status.StartTime != nil {
		out.StartTime = unix(*p.Status.StartTime)
	}
	if out.RestartPolicy == "" {
		out.RestartPolicy = string(corev1.RestartPolicyAlways)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
			break
		}
	}
	return out
}

func containers(list []corev1.Container) []projection.Container {
	if len(list) == 0 {
		return nil
	}
	out := make([]projection.Container, len(list))
	for i, c := range list {
		out[i] = projection.Container{Name: projection.Intern(c.Name), Image: projection.Intern(c.Image)}
	}
	return out
}

func containerStatuses(list []corev1.ContainerStatus) []projection.ContainerStatus {
	if len(list) == 0 {
		return nil
	}
	out := make([]projection.ContainerStatus, len(list))
	for i, c := range list {
		cs := projection.ContainerStatus{Name: projection.Intern(c.Name), Image: projection.Intern(c.Image), Ready: c.Ready, RestartCount: c.RestartCount}
		if w := c.State.Waiting; w != nil {
			cs.Waiting, cs.WaitingReason, cs.WaitingMessage = true, projection.Intern(w.Reason), w.Message
		}
		cs.Running = c.State.Running != nil
		cs.Terminated = terminated(c.State.Terminated)
		cs.LastTerminated = terminated(c.LastTerminationState.Terminated)
		out[i] = cs
	}
	return out
}

// podSlices are the slices of a pod's summary that its siblings share.
type podSlices struct {
	labels         projection.Labels
	owners         []projection.OwnerRef
	containers     []projection.Container
	init, statuses []projection.ContainerStatus
}

// same reports whether p and q hold the same slices (not only equal ones).
func (p podSlices) same(q podSlices) bool {
	return sameSlice(p.labels, q.labels) && sameSlice(p.owners, q.owners) && sameSlice(p.containers, q.containers) &&
		sameSlice(p.init, q.init) && sameSlice(p.statuses, q.statuses)
}

func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// siblingSlices remembers the slices of the pod last decoded for each
// controller, so that its next sibling can share them. It holds two
// generations of at most siblingGeneration controllers each: a controller
// not seen for a generation is forgotten (its pods were all decoded; a
// later pod of its simply holds its own copies), so the table stays small
// however many ReplicaSets come and go.
type siblingSlices struct {
	mu        sync.Mutex
	cur, prev map[string]podSlices // by the controller's UID
}

const siblingGeneration = 4096

var siblings siblingSlices

// get is the slices of the controller's last pod (zero when none is
// remembered); one remembered from the generation before is kept for
// the next.
func (s *siblingSlices) get(owner string) podSlices {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl, ok := s.cur[owner]; ok {
		return sl
	}
	sl, ok := s.prev[owner]
	if ok {
		s.keep(sl)
	}
	return sl
}

// put remembers sl as the last pod's of its controller.
func (s *siblingSlices) put(sl podSlices) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep(sl)
}

// keep remembers sl in the current generation, keyed by its controller's
// UID (interned, as owners built it). Called with s.mu held.
func (s *siblingSlices) keep(sl podSlices) {
	owner := ""
	for _, r := range sl.owners {
		if r.Controller {
			owner = r.UID
			break
		}
	}
	if owner == "" {
		return
	}
	if len(s.cur) >= siblingGeneration {
		s.prev, s.cur = s.cur, nil
	}
	if s.cur == nil {
		s.cur = make(map[string]podSlices)
	}
	s.cur[owner] = sl
}

// controllerUID is the UID of the owner reference that is the controller,
// "" when none is.
func controllerUID(refs []metav1.OwnerReference) string {
	for i := range refs {
		if isController(&refs[i]) {
			return string(refs[i].UID)
		}
	}
	return ""
}

func isController(r *metav1.OwnerReference) bool { return r.Controller != nil && *r.Controller }

// sliceEqual reports whether a wire slice says what a held summary slice
// holds, element by element.
func sliceEqual[W, H any](wire []W, held []H, eq func(*W, *H) bool) bool {
	if len(wire) != len(held) {
		return false
	}
	for i := range wire {
		if !eq(&wire[i], &held[i]) {
			return false
		}
	}
	return true
}

func ownersEqual(refs []metav1.OwnerReference, held []projection.OwnerRef) bool {
	return sliceEqual(refs, held, ownerEqual)
}

func ownerEqual(r *metav1.OwnerReference, h *projection.OwnerRef) bool {
	return r.Kind == h.Kind && r.Name == h.Name && string(r.UID) == h.UID && isController(r) == h.Controller
}

func containersEqual(list []corev1.Container, held []projection.Container) bool {
	return sliceEqual(list, held, func(c *corev1.Container, h *projection.Container) bool {
		return c.Name == h.Name && c.Image == h.Image
	})
}

func statusesEqual(list []corev1.ContainerStatus, held []projection.ContainerStatus) bool {
	return sliceEqual(list, held, statusEqual)
}

func statusEqual(c *corev1.ContainerStatus, s *projection.ContainerStatus) bool {
	if c.Name != s.Name || c.Image != s.Image || c.Ready != s.Ready || c.RestartCount != s.RestartCount {
		return false
	}
	if w := c.State.Waiting; (w != nil) != s.Waiting || (w != nil && (w.Reason != s.WaitingReason || w.Message != s.WaitingMessage)) {
		return false
	}
	return (c.State.Running != nil) == s.Running && terminatedEqual(c.State.Terminated, s.Terminated) &&
		terminatedEqual(c.LastTerminationState.Terminated, s.LastTerminated)
}

func terminatedEqual(t *corev1.ContainerStateTerminated, held *projection.Terminated) bool {
	if t == nil || held == nil {
		return t == nil && held == nil
	}
	return t.Reason == held.Reason && t.Message == held.Message && t.ExitCode == held.ExitCode
}

func terminated(t *corev1.ContainerStateTerminated) *projection.Terminated {
	if t == nil {
		return nil
	}
	return &projection.Terminated{Reason: t.Reason, Message: t.Message, ExitCode: t.ExitCode}
}

func selector(sel *metav1.LabelSelector) projection.Selector {
	if sel == nil {
		return projection.Selector{}
	}
	out := projection.Selector{MatchLabels: projection.MakeLabels(sel.MatchLabels)}
	for _, r := range sel.MatchExpressions {
		op := string(r.Operator)
		switch r.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
		default:
			out.Invalid = true
		}
		var values []string
		if len(r.Values) > 0 {
			values = append(values, r.Values...)
		}
		out.Expressions = append(out.Expressions, projection.Requirement{Key: r.Key, Operator: op, Values: values})
	}
	return out
}

func owners(refs []metav1.OwnerReference) []projection.OwnerRef {
	if len(refs) == 0 {
		return nil
	}
	out := make([]projection.OwnerRef, len(refs))
	for i, r := range refs {
		out[i] = projection.OwnerRef{Kind: projection.Intern(r.Kind), Name: projection.Intern(r.Name), UID: projection.Intern(string(r.UID)), Controller: isController(&r)}
	}
	return out
}

func conditions[C any](list []C, conv func(C) projection.Condition) []projection.Condition {
	if len(list) == 0 {
		return nil
	}
	out := make([]projection.Condition, len(list))
	for i, c := range list {
		cond := conv(c)
		cond.Type, cond.Status, cond.Reason = projection.Intern(cond.Type), projection.Intern(cond.Status), projection.Intern(cond.Reason)
		out[i] = cond
	}
	return out
}

// unix is a timestamp in Unix seconds, 0 when unset.
func unix(t metav1.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
