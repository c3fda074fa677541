package projection

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Annotations the fold reads.
const (
	AnnotationSyncRequestedAt = "gitops.hanzo.ai/sync-requested-at"
	AnnotationSyncRequestedBy = "gitops.hanzo.ai/sync-requested-by" // the subject
	// AnnotationSyncRequestedByName is the display name of the subject in
	// AnnotationSyncRequestedBy; the operation's initiatedBy shows it when
	// present.
	AnnotationSyncRequestedByName = "gitops.hanzo.ai/sync-requested-by-name"
	AnnotationRevision            = "deployment.kubernetes.io/revision"
	AnnotationRestartedAt         = "hanzo.ai/restartedAt"
	AnnotationLastApplied         = "kubectl.kubernetes.io/last-applied-configuration"
)

// ErrUnknownKind is returned for an object whose kind is not one deployd
// reads (Secret above all).
var ErrUnknownKind = errors.New("kind is not in the registry")

// Decode summarizes an object in its unstructured form (the map of
// unstructured.Unstructured.Object, as decoded from JSON or YAML). It never
// panics: fields of an unexpected type read as absent. It fails only when the
// object has no kind deployd knows, or no name.
func Decode(obj map[string]any) (*Object, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kindName, _ := obj["kind"].(string)
	k := LookupKindByAPIVersion(apiVersion, kindName)
	if k == KindUnknown {
		return nil, fmt.Errorf("%w: %s %q", ErrUnknownKind, apiVersion, kindName)
	}
	return DecodeKind(k, obj)
}

// DecodeKind is Decode for an object whose kind is already known (informers
// know their kind; list items may lack apiVersion and kind).
func DecodeKind(k Kind, obj map[string]any) (*Object, error) {
	if k == KindUnknown || k >= kindCount {
		return nil, ErrUnknownKind
	}
	md := m(obj, "metadata")
	o := &Object{
		Kind:            k,
		Namespace:       Intern(s(md, "namespace")),
		Name:            s(md, "name"),
		UID:             s(md, "uid"),
		ResourceVersion: s(md, "resourceVersion"),
		Generation:      i64(md, "generation"),
		Created:         ts(md, "creationTimestamp"),
		Deleting:        md["deletionTimestamp"] != nil,
		Labels:          stringMapLabels(m(md, "labels")),
		Owners:          decodeOwners(md),
	}
	if o.Name == "" {
		return nil, errors.New("object has no metadata.name")
	}
	spec, status, ann := m(obj, "spec"), m(obj, "status"), m(md, "annotations")
	switch k {
	case KindApp:
		a := decodeApp(spec, status, ann)
		a.Engine = decodeEngineMark(o.Labels, ann)
		o.Spec = a
	case KindDeployment, KindStatefulSet, KindReplicaSet, KindDaemonSet:
		o.Spec = decodeWorkload(spec, status, ann)
	case KindPod:
		o.Spec = decodePod(spec, status)
	case KindService:
		o.Spec = &ServiceSpec{Type: s(spec, "type"), Selector: stringMapLabels(m(spec, "selector")), LoadBalancer: loadBalancer(status)}
	case KindIngress:
		o.Spec = decodeIngress(spec, status)
	case KindHPA:
		o.Spec = &HPASpec{Conditions: decodeConditions(status)}
	case KindPVC:
		o.Spec = &PVCSpec{Phase: s(status, "phase")}
	case KindJob:
		o.Spec = &JobSpec{Conditions: decodeConditions(status)}
	case KindMiddleware:
		o.Spec = &MiddlewareSpec{StaticRoot: s(m(spec, "staticFiles"), "root")}
	case KindIngressRoute:
		o.Spec = decodeIngressRoute(spec)
	case KindCDApplication:
		o.Spec = decodeCDApplication(spec, status)
	}
	return o, nil
}

func decodeOwners(md map[string]any) []OwnerRef {
	list := sl(md, "ownerReferences")
	if len(list) == 0 {
		return nil
	}
	out := make([]OwnerRef, 0, len(list))
	for _, x := range list {
		r, _ := x.(map[string]any)
		if r == nil {
			continue
		}
		out = append(out, OwnerRef{Kind: Intern(s(r, "kind")), Name: Intern(s(r, "name")), UID: Intern(s(r, "uid")), Controller: b(r, "controller")})
	}
	return out
}

func decodeApp(spec, status, ann map[string]any) *AppSpec {
	img := m(spec, "image")
	a := &AppSpec{
		Repository:      s(img, "repository"),
		Tag:             s(img, "tag"),
		PullPolicy:      s(img, "pullPolicy"),
		Replicas:        1,
		Role:            s(spec, "role"),
		SyncRequestedAt: s(ann, AnnotationSyncRequestedAt),
		SyncRequestedBy: s(ann, AnnotationSyncRequestedBy),
	}
	if name := s(ann, AnnotationSyncRequestedByName); name != "" {
		a.SyncRequestedBy = name
	}
	if r, ok := i64ok(spec, "replicas"); ok {
		a.Replicas = clamp32(r)
	}
	if ing := m(spec, "ingress"); ing != nil {
		a.Ingress = AppIngress{Enabled: b(ing, "enabled"), Hosts: strs(ing, "hosts"), TLS: b(ing, "tls")}
	}
	if len(status) > 0 {
		a.HasStatus = true
		a.Phase = s(status, "phase")
		a.ReadyReplicas = clamp32(i64(status, "readyReplicas"))
		a.AvailableReplicas = clamp32(i64(status, "availableReplicas"))
		a.ObservedGeneration = i64(status, "observedGeneration")
		a.Ready = findCondition(decodeConditions(status), "Ready")
		a.Endpoints = strs(status, "endpoints")
		a.LastGoodImage = s(status, "lastGoodImage")
		for _, x := range sl(status, "upgradeHistory") {
			u, _ := x.(map[string]any)
			if u == nil {
				continue
			}
			a.UpgradeHistory = append(a.UpgradeHistory, Upgrade{
				Tag: s(u, "tag"), Image: s(u, "image"),
				StartedAt: ts(u, "startedAt"), CompletedAt: ts(u, "completedAt"),
				Result: s(u, "result"), Message: s(u, "message"),
			})
		}
	}
	return a
}

func decodeWorkload(spec, status, ann map[string]any) *WorkloadSpec {
	tmpl := m(spec, "template")
	w := &WorkloadSpec{
		Paused:      b(spec, "paused"),
		Selector:    decodeSelector(m(spec, "selector")),
		Containers:  decodeContainers(m(tmpl, "spec"), "containers"),
		Revision:    s(ann, AnnotationRevision),
		RestartedAt: s(m(m(tmpl, "metadata"), "annotations"), AnnotationRestartedAt),

		ObservedGeneration: i64(status, "observedGeneration"),
		StatusReplicas:     clamp32(i64(status, "replicas")),
		UpdatedReplicas:    clamp32(i64(status, "updatedReplicas")),
		ReadyReplicas:      clamp32(i64(status, "readyReplicas")),
		AvailableReplicas:  clamp32(i64(status, "availableReplicas")),
		CurrentReplicas:    clamp32(i64(status, "currentReplicas")),
		CurrentRevision:    s(status, "currentRevision"),
		UpdateRevision:     s(status, "updateRevision"),
		Conditions:         decodeConditions(status),

		DesiredNumberScheduled: clamp32(i64(status, "desiredNumberScheduled")),
		UpdatedNumberScheduled: clamp32(i64(status, "updatedNumberScheduled")),
		NumberAvailable:        clamp32(i64(status, "numberAvailable")),
	}
	if r, ok := i64ok(spec, "replicas"); ok {
		v := clamp32(r)
		w.Replicas = &v
	}
	if id, err := strconv.ParseInt(w.Revision, 10, 64); err == nil && id > 0 {
		w.RevisionID = id
	}
	if us := m(spec, "updateStrategy"); us != nil {
		w.UpdateStrategy = s(us, "type")
		w.RollingUpdate = m(us, "rollingUpdate") != nil
		if p, ok := i64ok(m(us, "rollingUpdate"), "partition"); ok {
			v := clamp32(p)
			w.Partition = &v
		}
	}
	return w
}

func decodeSelector(sel map[string]any) Selector {
	if sel == nil {
		return Selector{}
	}
	out := Selector{MatchLabels: stringMapLabels(m(sel, "matchLabels"))}
	for _, x := range sl(sel, "matchExpressions") {
		r, _ := x.(map[string]any)
		if r == nil {
			out.Invalid = true
			continue
		}
		op := s(r, "operator")
		switch op {
		case "In", "NotIn", "Exists", "DoesNotExist":
		default:
			out.Invalid = true
		}
		out.Expressions = append(out.Expressions, Requirement{Key: s(r, "key"), Operator: op, Values: strs(r, "values")})
	}
	return out
}

func decodeContainers(podSpec map[string]any, field string) []Container {
	list := sl(podSpec, field)
	if len(list) == 0 {
		return nil
	}
	out := make([]Container, 0, len(list))
	for _, x := range list {
		c, _ := x.(map[string]any)
		if c == nil {
			continue
		}
		out = append(out, Container{Name: Intern(s(c, "name")), Image: Intern(s(c, "image"))})
	}
	return out
}

func decodePod(spec, status map[string]any) *PodSpec {
	p := &PodSpec{
		RestartPolicy: Intern(s(spec, "restartPolicy")),
		NodeName:      Intern(s(spec, "nodeName")),
		Containers:    decodeContainers(spec, "containers"),
		Phase:         Intern(s(status, "phase")),
		Message:       s(status, "message"),
		StartTime:     ts(status, "startTime"),
		InitStatuses:  decodeContainerStatuses(status, "initContainerStatuses"),
		Statuses:      decodeContainerStatuses(status, "containerStatuses"),
		PodIP:         s(status, "podIP"),
	}
	if p.RestartPolicy == "" {
		p.RestartPolicy = "Always"
	}
	if c := findCondition(decodeConditions(status), "Ready"); c != nil && c.Status == "True" {
		p.Ready = true
	}
	return p
}

func decodeContainerStatuses(status map[string]any, field string) []ContainerStatus {
	list := sl(status, field)
	if len(list) == 0 {
		return nil
	}
	out := make([]ContainerStatus, 0, len(list))
	for _, x := range list {
		c, _ := x.(map[string]any)
		if c == nil {
			continue
		}
		cs := ContainerStatus{
			Name:         Intern(s(c, "name")),
			Image:        Intern(s(c, "image")),
			Ready:        b(c, "ready"),
			RestartCount: clamp32(i64(c, "restartCount")),
		}
		state := m(c, "state")
		if w := m(state, "waiting"); w != nil {
			cs.Waiting, cs.WaitingReason, cs.WaitingMessage = true, Intern(s(w, "reason")), s(w, "message")
		}
		cs.Running = m(state, "running") != nil
		cs.Terminated = decodeTerminated(m(state, "terminated"))
		cs.LastTerminated = decodeTerminated(m(m(c, "lastState"), "terminated"))
		out = append(out, cs)
	}
	return out
}

func decodeTerminated(t map[string]any) *Terminated {
	if t == nil {
		return nil
	}
	return &Terminated{Reason: s(t, "reason"), Message: s(t, "message"), ExitCode: clamp32(i64(t, "exitCode"))}
}

func decodeIngress(spec, status map[string]any) *IngressSpec {
	in := &IngressSpec{LoadBalancer: loadBalancer(status), TLS: len(sl(spec, "tls")) > 0}
	backend := func(b map[string]any) { in.Services = AppendService(in.Services, s(m(b, "service"), "name")) }
	backend(m(spec, "defaultBackend"))
	for _, x := range sl(spec, "rules") {
		r, _ := x.(map[string]any)
		if h := s(r, "host"); h != "" {
			in.Hosts = append(in.Hosts, h)
		}
		for _, p := range sl(m(r, "http"), "paths") {
			pm, _ := p.(map[string]any)
			backend(m(pm, "backend"))
		}
	}
	return in
}

// loadBalancer is status.loadBalancer.ingress: each entry's hostname, else
// its IP.
func loadBalancer(status map[string]any) []string {
	var out []string
	for _, x := range sl(m(status, "loadBalancer"), "ingress") {
		e, _ := x.(map[string]any)
		out = AppendAddress(out, s(e, "hostname"), s(e, "ip"))
	}
	return out
}

// AppendAddress adds a load balancer's address: its hostname, else its IP.
func AppendAddress(out []string, hostname, ip string) []string {
	switch {
	case hostname != "":
		return append(out, Intern(hostname))
	case ip != "":
		return append(out, Intern(ip))
	}
	return out
}

// AppendService adds a backend Service's name to names once ("" is none).
func AppendService(names []string, name string) []string {
	if name == "" || slices.Contains(names, name) {
		return names
	}
	return append(names, Intern(name))
}

func decodeIngressRoute(spec map[string]any) *IngressRouteSpec {
	ir := &IngressRouteSpec{}
	for _, x := range sl(spec, "routes") {
		r, _ := x.(map[string]any)
		if r == nil {
			continue
		}
		route := Route{Match: s(r, "match")}
		for _, y := range sl(r, "middlewares") {
			mw, _ := y.(map[string]any)
			if n := s(mw, "name"); n != "" {
				route.Middlewares = append(route.Middlewares, MiddlewareRef{Name: n, Namespace: s(mw, "namespace")})
			}
		}
		ir.Routes = append(ir.Routes, route)
	}
	return ir
}

func decodeCDApplication(spec, status map[string]any) *CDApplicationSpec {
	src, dst := m(spec, "source"), m(spec, "destination")
	return &CDApplicationSpec{
		Project:        s(spec, "project"),
		RepoURL:        s(src, "repoURL"),
		Path:           s(src, "path"),
		TargetRevision: s(src, "targetRevision"),
		DestServer:     s(dst, "server"),
		DestNamespace:  s(dst, "namespace"),
		SyncStatus:     s(m(status, "sync"), "status"),
		SyncRevision:   s(m(status, "sync"), "revision"),
		HealthStatus:   s(m(status, "health"), "status"),
		HealthMessage:  s(m(status, "health"), "message"),
	}
}

func decodeConditions(status map[string]any) []Condition {
	list := sl(status, "conditions")
	if len(list) == 0 {
		return nil
	}
	out := make([]Condition, 0, len(list))
	for _, x := range list {
		c, _ := x.(map[string]any)
		if c == nil {
			continue
		}
		out = append(out, Condition{Type: Intern(s(c, "type")), Status: Intern(s(c, "status")), Reason: Intern(s(c, "reason")), Message: s(c, "message")})
	}
	return out
}

// Typed readers over unstructured maps. A missing field, a nil map or a value
// of the wrong type reads as the zero value.

func m(obj map[string]any, key string) map[string]any {
	v, _ := obj[key].(map[string]any)
	return v
}

func s(obj map[string]any, key string) string {
	v, _ := obj[key].(string)
	return v
}

func b(obj map[string]any, key string) bool {
	v, _ := obj[key].(bool)
	return v
}

func sl(obj map[string]any, key string) []any {
	v, _ := obj[key].([]any)
	return v
}

func strs(obj map[string]any, key string) []string {
	list := sl(obj, key)
	if len(list) == 0 {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		if v, ok := x.(string); ok {
			out = append(out, v)
		}
	}
	return out
}

func i64(obj map[string]any, key string) int64 {
	v, _ := i64ok(obj, key)
	return v
}

// i64ok reads an integer whatever number type the decoder produced
// (int64 from apimachinery, float64 from encoding/json).
func i64ok(obj map[string]any, key string) (int64, bool) {
	switch v := obj[key].(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case float64:
		if v != v || v > math.MaxInt64 || v < math.MinInt64 {
			return 0, false
		}
		return int64(v), true
	case interface{ Int64() (int64, error) }: // json.Number
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}

func clamp32(v int64) int32 {
	switch {
	case v > math.MaxInt32:
		return math.MaxInt32
	case v < math.MinInt32:
		return math.MinInt32
	}
	return int32(v)
}

// ts reads an RFC 3339 timestamp as Unix seconds; 0 when absent or invalid.
func ts(obj map[string]any, key string) int64 {
	v, _ := obj[key].(string)
	if v == "" {
		return 0
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return 0
	}
	return t.Unix()
}

func stringMapLabels(raw map[string]any) Labels {
	if len(raw) == 0 {
		return nil
	}
	out := make(Labels, 0, len(raw))
	for k, v := range raw {
		if sv, ok := v.(string); ok {
			out = append(out, Label{Intern(k), Intern(sv)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
