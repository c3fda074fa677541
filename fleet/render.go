package fleet

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Labels and annotations the renderer writes.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelVersion   = "app.kubernetes.io/version"
	LabelOrg       = "hanzo.ai/org"
	LabelHash      = "pod-template-hash"
	ManagedBy      = "hanzo-operator"

	AnnotationRevision    = "deployment.kubernetes.io/revision"
	AnnotationRestartedAt = "hanzo.ai/restartedAt"
	AnnotationSyncAt      = "gitops.hanzo.ai/sync-requested-at"

	// ConditionReconciled is the App condition that records the sync
	// request the operator reconciled last.
	ConditionReconciled = "Reconciled"
)

// Render returns the objects of a fleet entry: for an App, the App CR and
// everything the operator and the controllers make of it in the given
// state (AtRest(app) when none is given): its Deployment, one ReplicaSet per
// revision, the pods of every ReplicaSet, the Service, the
// <app>-replicate-config ConfigMap, and the Ingress, HPA and PDB when the
// App has them. A site renders as a Middleware and an IngressRoute, a CD
// Application and an AppProject as themselves. Owners come before what they
// own.
func Render(app App, state ...State) []*unstructured.Unstructured {
	switch app.Kind {
	case KindSite:
		return wrap(renderMiddleware(&app), renderIngressRoute(&app))
	case KindCD:
		return wrap(renderCDApplication(&app))
	case KindProject:
		return wrap(renderAppProject(&app))
	}
	var st State
	if len(state) > 0 {
		st = state[0]
	} else {
		st = AtRest(app)
	}
	objs := []map[string]any{renderApp(&app, &st), renderDeployment(&app, &st)}
	for i := range st.ReplicaSets {
		objs = append(objs, renderReplicaSet(&app, &st, &st.ReplicaSets[i]))
	}
	for i := range st.ReplicaSets {
		rs := &st.ReplicaSets[i]
		for j := range rs.Pods {
			objs = append(objs, renderPod(&app, rs, &rs.Pods[j]))
		}
	}
	objs = append(objs, renderService(&app), renderConfigMap(&app, &st))
	if len(app.Hosts) > 0 {
		objs = append(objs, renderIngress(&app))
	}
	if app.Autoscale != nil && app.Replicas > 0 {
		objs = append(objs, renderHPA(&app))
	}
	if app.PDB {
		objs = append(objs, renderPDB(&app, &st))
	}
	return wrap(objs...)
}

// RenderAll renders every entry of a fleet at rest.
func RenderAll(apps []App) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, a := range apps {
		out = append(out, Render(a)...)
	}
	return out
}

func wrap(objs ...map[string]any) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out
}

// ts formats a time as the API server does.
func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// meta is the metadata every rendered object carries.
func meta(namespace, kind, name string, created time.Time, labels map[string]any) map[string]any {
	m := map[string]any{
		"name":              name,
		"namespace":         namespace,
		"uid":               UID(namespace, kind, name),
		"creationTimestamp": ts(created),
	}
	if len(labels) > 0 {
		m["labels"] = labels
	}
	return m
}

func ownedBy(m map[string]any, apiVersion, kind, namespace, name string) map[string]any {
	m["ownerReferences"] = []any{map[string]any{
		"apiVersion": apiVersion, "kind": kind, "name": name, "uid": UID(namespace, kind, name),
		"controller": true, "blockOwnerDeletion": true,
	}}
	return m
}

// childLabels are the labels the operator puts on what it renders.
func childLabels(app *App) map[string]any {
	l := map[string]any{LabelName: app.Name, LabelInstance: app.Name, LabelManagedBy: ManagedBy}
	if app.Project != "" {
		l[LabelPartOf] = app.Project
	}
	return l
}

// selectorLabels select the App's pods.
func selectorLabels(app *App) map[string]any {
	return map[string]any{LabelName: app.Name, LabelInstance: app.Name}
}

func renderApp(app *App, st *State) map[string]any {
	labels := map[string]any{}
	if app.Org != "" {
		labels[LabelOrg] = app.Org
	}
	if app.Project != "" {
		labels[LabelPartOf] = app.Project
	}
	md := meta(app.Namespace, "App", app.Name, app.Created, labels)
	md["generation"] = st.Generation
	spec := map[string]any{
		"image":    map[string]any{"repository": app.Repository, "tag": app.Tag, "pullPolicy": "IfNotPresent"},
		"replicas": int64(app.Replicas),
		"role":     app.Role,
		"port":     int64(app.Port),
	}
	if len(app.Hosts) > 0 {
		spec["ingress"] = map[string]any{"enabled": true, "hosts": strs(app.Hosts), "tls": app.TLS}
	}
	return map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App", "metadata": md, "spec": spec,
		"status": appStatus(app, st),
	}
}

// Phase is the App phase the operator reports for a state.
func Phase(app *App, st *State) string {
	ready, desired := st.ReadyPods(), app.Replicas
	switch {
	case desired <= 0 || ready >= desired:
		return "Running"
	case failing(st):
		return "Degraded"
	case ready == 0:
		return "Creating"
	}
	return "Running"
}

// failing reports whether a pod of the current ReplicaSet cannot start.
func failing(st *State) bool {
	rs := st.Current()
	if rs == nil {
		return false
	}
	for _, p := range rs.Pods {
		switch p.Waiting {
		case WaitingCrashLoop, WaitingErrPull, WaitingPullBackOff:
			return true
		}
	}
	return false
}

func appStatus(app *App, st *State) map[string]any {
	ready, desired := st.ReadyPods(), app.Replicas
	cond := map[string]any{"type": "Ready", "status": "True", "reason": "Available", "message": "all replicas ready",
		"lastTransitionTime": ts(st.ReadySince)}
	switch {
	case desired <= 0:
		cond["message"] = "scaled to zero"
	case ready < desired:
		cond["status"], cond["reason"] = "False", "PodsNotReady"
		cond["message"] = fmt.Sprintf("%d of %d pods are not ready", desired-ready, desired)
	}
	conds := []any{cond}
	if st.SyncRequest != "" {
		conds = append(conds, map[string]any{"type": ConditionReconciled, "status": "True", "reason": "SyncRequested",
			"message": "reconciled the sync requested at " + st.SyncRequest, "lastTransitionTime": ts(st.SyncedAt)})
	}
	status := map[string]any{
		"phase":              Phase(app, st),
		"readyReplicas":      int64(ready),
		"availableReplicas":  int64(ready),
		"observedGeneration": st.ObservedGeneration,
		"conditions":         conds,
	}
	if len(app.Hosts) > 0 {
		var eps []any
		for _, h := range app.Hosts {
			eps = append(eps, "https://"+h)
		}
		status["endpoints"] = eps
	}
	var history []any
	for _, u := range st.Upgrades {
		e := map[string]any{"tag": u.Tag, "image": app.Repository + ":" + u.Tag, "startedAt": ts(u.StartedAt), "result": u.Result}
		if !u.CompletedAt.IsZero() {
			e["completedAt"] = ts(u.CompletedAt)
		}
		if u.Message != "" {
			e["message"] = u.Message
		}
		history = append(history, e)
		if u.Result == UpgradeSucceeded {
			status["lastGoodImage"] = app.Repository + ":" + u.Tag
		}
	}
	if len(history) > 0 {
		status["upgradeHistory"] = history
	}
	return status
}

func renderService(app *App) map[string]any {
	md := ownedBy(meta(app.Namespace, "Service", app.Name, app.Created.Add(time.Second), childLabels(app)), "hanzo.ai/v1", "App", app.Namespace, app.Name)
	typ := "ClusterIP"
	if app.LoadBalancer {
		typ = "LoadBalancer"
	}
	o := map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": md,
		"spec": map[string]any{
			"type":     typ,
			"selector": selectorLabels(app),
			"ports":    []any{map[string]any{"name": "http", "port": int64(80), "targetPort": int64(app.Port), "protocol": "TCP"}},
		},
	}
	if app.LoadBalancer {
		o["status"] = map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": lbIP(app.Namespace + "/" + app.Name)}}}}
	}
	return o
}

func lbIP(key string) string { return "203.0.113." + strconv.Itoa(int(hash32(key)%250)+2) }

func renderConfigMap(app *App, st *State) map[string]any {
	name := app.Name + "-replicate-config"
	md := ownedBy(meta(app.Namespace, "ConfigMap", name, app.Created.Add(time.Second), childLabels(app)), "hanzo.ai/v1", "App", app.Namespace, app.Name)
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": md,
		"data": map[string]any{
			"replicas": strconv.Itoa(int(app.Replicas)),
			"image":    app.Repository + ":" + st.Template.Tag,
			"source":   app.Namespace + "/" + app.Name,
		},
	}
}

func renderIngress(app *App) map[string]any {
	md := ownedBy(meta(app.Namespace, "Ingress", app.Name, app.Created.Add(time.Second), childLabels(app)), "hanzo.ai/v1", "App", app.Namespace, app.Name)
	var rules []any
	for _, h := range app.Hosts {
		rules = append(rules, map[string]any{
			"host": h,
			"http": map[string]any{"paths": []any{map[string]any{
				"path": "/", "pathType": "Prefix",
				"backend": map[string]any{"service": map[string]any{"name": app.Name, "port": map[string]any{"number": int64(80)}}},
			}}},
		})
	}
	spec := map[string]any{"ingressClassName": "nginx", "rules": rules}
	if app.TLS {
		spec["tls"] = []any{map[string]any{"hosts": strs(app.Hosts), "secretName": app.Name + "-tls"}}
	}
	return map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": md, "spec": spec,
		"status": map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": lbIP("ingress")}}}},
	}
}

func renderHPA(app *App) map[string]any {
	md := ownedBy(meta(app.Namespace, "HorizontalPodAutoscaler", app.Name, app.Created.Add(time.Second), childLabels(app)), "hanzo.ai/v1", "App", app.Namespace, app.Name)
	return map[string]any{
		"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": md,
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": app.Name},
			"minReplicas":    int64(app.Autoscale.Min),
			"maxReplicas":    int64(app.Autoscale.Max),
			"metrics": []any{map[string]any{"type": "Resource", "resource": map[string]any{
				"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": int64(70)}}}},
		},
		"status": map[string]any{
			"currentReplicas": int64(app.Replicas),
			"desiredReplicas": int64(app.Replicas),
			"conditions": []any{
				map[string]any{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "message": "recommended size matches current size", "lastTransitionTime": ts(app.Created.Add(time.Minute))},
				map[string]any{"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)", "lastTransitionTime": ts(app.Created.Add(time.Minute))},
				map[string]any{"type": "ScalingLimited", "status": "False", "reason": "DesiredWithinRange", "message": "the desired count is within the acceptable range", "lastTransitionTime": ts(app.Created.Add(time.Minute))},
			},
		},
	}
}

func renderPDB(app *App, st *State) map[string]any {
	md := ownedBy(meta(app.Namespace, "PodDisruptionBudget", app.Name, app.Created.Add(time.Second), childLabels(app)), "hanzo.ai/v1", "App", app.Namespace, app.Name)
	md["generation"] = int64(1)
	ready := int64(st.ReadyPods())
	return map[string]any{
		"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": md,
		"spec": map[string]any{"minAvailable": int64(1), "selector": map[string]any{"matchLabels": selectorLabels(app)}},
		"status": map[string]any{
			"observedGeneration": int64(1),
			"currentHealthy":     ready,
			"desiredHealthy":     int64(1),
			"disruptionsAllowed": max(0, ready-1),
			"expectedPods":       int64(app.Replicas),
		},
	}
}

func renderMiddleware(app *App) map[string]any {
	labels := map[string]any{}
	if app.Org != "" {
		labels[LabelOrg] = app.Org
	}
	if app.Project != "" {
		labels[LabelPartOf] = app.Project
	}
	return map[string]any{
		"apiVersion": "hanzo.ai/v1alpha1", "kind": "Middleware",
		"metadata": meta(app.Namespace, "Middleware", app.Name, app.Created, labels),
		"spec":     map[string]any{"staticFiles": map[string]any{"root": app.Root}},
	}
}

func renderIngressRoute(app *App) map[string]any {
	var matches []string
	for _, h := range app.Hosts {
		matches = append(matches, "Host(`"+h+"`)")
	}
	return map[string]any{
		"apiVersion": "hanzo.ai/v1alpha1", "kind": "IngressRoute",
		"metadata": meta(app.Namespace, "IngressRoute", app.Name, app.Created, nil),
		"spec": map[string]any{
			"entryPoints": []any{"websecure"},
			"routes": []any{map[string]any{
				"match":       strings.Join(matches, " || "),
				"kind":        "Rule",
				"middlewares": []any{map[string]any{"name": app.Name}},
				"services":    []any{map[string]any{"name": "static-files", "port": int64(80)}},
			}},
			"tls": map[string]any{"certResolver": "letsencrypt"},
		},
	}
}

func renderCDApplication(app *App) map[string]any {
	return map[string]any{
		"apiVersion": "apps.hanzo.ai/v1alpha1", "kind": "Application",
		"metadata": meta(app.Namespace, "Application", app.Name, app.Created, nil),
		"spec": map[string]any{
			"project":     app.Project,
			"source":      map[string]any{"repoURL": app.RepoURL, "path": app.Path, "targetRevision": app.TargetRevision},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": app.Namespace},
		},
		"status": map[string]any{
			"sync":   map[string]any{"status": app.SyncStatus, "revision": digest(app.RepoURL)[7:47]},
			"health": map[string]any{"status": app.HealthStatus},
		},
	}
}

func renderAppProject(app *App) map[string]any {
	return map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": meta(app.Namespace, "AppProject", app.Name, app.Created, nil),
		"spec": map[string]any{
			"description":  app.Description,
			"sourceRepos":  []any{"https://github.com/hanzoai/*"},
			"destinations": []any{map[string]any{"server": "https://kubernetes.default.svc", "namespace": "hanzo*"}},
		},
	}
}

func strs(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

// Manifest is the App as a manifest repository declares it: apiVersion,
// kind, name, namespace, labels and spec, without what a server or the
// operator adds (uid, times, generation, status). Only Apps have one.
func Manifest(app App) (*unstructured.Unstructured, bool) {
	if app.Kind != KindApp {
		return nil, false
	}
	st := AtRest(app)
	u := &unstructured.Unstructured{Object: renderApp(&app, &st)}
	delete(u.Object, "status")
	for _, f := range []string{"uid", "creationTimestamp", "generation"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	return u, true
}
