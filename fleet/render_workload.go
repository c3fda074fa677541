package fleet

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxSurge is how many pods a rolling update may run above desired: 25%
// rounded up, as Kubernetes' default.
func MaxSurge(desired int32) int32 { return (desired + 3) / 4 }

// MaxUnavailable is how many of desired may be unavailable during a rolling
// update: 25% rounded down, as Kubernetes' default (and at least one when
// the surge is zero).
func MaxUnavailable(desired int32) int32 {
	u := desired / 4
	if u == 0 && MaxSurge(desired) == 0 {
		u = 1
	}
	return u
}

// containers are the App's containers running tag.
func containers(app *App, tag string) []any {
	main := map[string]any{
		"name":            app.Name,
		"image":           app.Repository + ":" + tag,
		"imagePullPolicy": "IfNotPresent",
		"ports":           []any{map[string]any{"name": "http", "containerPort": int64(app.Port), "protocol": "TCP"}},
	}
	out := []any{main}
	if app.Sidecar != "" {
		out = append(out, map[string]any{"name": sidecarName(app.Sidecar), "image": app.Sidecar, "imagePullPolicy": "IfNotPresent"})
	}
	return out
}

// sidecarName names a sidecar container after its image ("oauth-proxy").
func sidecarName(image string) string {
	name := image[strings.LastIndexByte(image, '/')+1:]
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	return name
}

func podTemplate(app *App, tpl Template, hash string) map[string]any {
	labels := selectorLabels(app)
	if hash != "" {
		labels[LabelHash] = hash
	}
	md := map[string]any{"labels": labels}
	if tpl.RestartedAt != "" {
		md["annotations"] = map[string]any{AnnotationRestartedAt: tpl.RestartedAt}
	}
	return map[string]any{
		"metadata": md,
		"spec":     map[string]any{"containers": containers(app, tpl.Tag), "restartPolicy": "Always"},
	}
}

// counts are the pod counts a Deployment reports.
type counts struct{ replicas, updated, ready int32 }

func deploymentCounts(st *State) counts {
	var c counts
	cur := st.Current()
	for i := range st.ReplicaSets {
		rs := &st.ReplicaSets[i]
		for _, p := range rs.Pods {
			c.replicas++
			if rs == cur {
				c.updated++
			}
			if p.Ready {
				c.ready++
			}
		}
	}
	return c
}

// RolloutComplete reports whether the Deployment runs desired pods, all of
// the current ReplicaSet, all ready.
func RolloutComplete(app *App, st *State) bool {
	c := deploymentCounts(st)
	return st.Current() != nil && c.updated == app.Replicas && c.replicas == app.Replicas && c.ready == app.Replicas
}

func renderDeployment(app *App, st *State) map[string]any {
	labels := childLabels(app)
	labels[LabelVersion] = st.Template.Tag
	md := ownedBy(meta(app.Namespace, "Deployment", app.Name, app.Created.Add(time.Second), labels), "hanzo.ai/v1", "App", app.Namespace, app.Name)
	md["generation"] = st.DeploymentGeneration
	md["annotations"] = map[string]any{AnnotationRevision: strconv.FormatInt(st.Revision(), 10)}

	c := deploymentCounts(st)
	rsName := ReplicaSetName(app, st.Template)
	available := "True"
	availReason, availMsg := "MinimumReplicasAvailable", "Deployment has minimum availability."
	if c.ready < app.Replicas-MaxUnavailable(app.Replicas) {
		available, availReason, availMsg = "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
	}
	progressing, progReason := "True", "ReplicaSetUpdated"
	progMsg := fmt.Sprintf("ReplicaSet %q is progressing.", rsName)
	switch {
	case st.DeadlineExceeded:
		progressing, progReason = "False", "ProgressDeadlineExceeded"
		progMsg = fmt.Sprintf("ReplicaSet %q has timed out progressing.", rsName)
	case RolloutComplete(app, st):
		progReason = "NewReplicaSetAvailable"
		progMsg = fmt.Sprintf("ReplicaSet %q has successfully progressed.", rsName)
	}
	status := map[string]any{
		"observedGeneration": st.DeploymentGeneration,
		"replicas":           int64(c.replicas),
		"updatedReplicas":    int64(c.updated),
		"readyReplicas":      int64(c.ready),
		"availableReplicas":  int64(c.ready),
		"conditions": []any{
			map[string]any{"type": "Available", "status": available, "reason": availReason, "message": availMsg,
				"lastUpdateTime": ts(st.ReadySince), "lastTransitionTime": ts(st.ReadySince)},
			map[string]any{"type": "Progressing", "status": progressing, "reason": progReason, "message": progMsg,
				"lastUpdateTime": ts(st.RolloutStarted), "lastTransitionTime": ts(st.RolloutStarted)},
		},
	}
	if u := app.Replicas - c.ready; u > 0 {
		status["unavailableReplicas"] = int64(u)
	}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": md,
		"spec": map[string]any{
			"replicas":                int64(app.Replicas),
			"revisionHistoryLimit":    int64(10),
			"progressDeadlineSeconds": int64(600),
			"selector":                map[string]any{"matchLabels": selectorLabels(app)},
			"strategy": map[string]any{"type": "RollingUpdate",
				"rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": "25%"}},
			"template": podTemplate(app, st.Template, ""),
		},
		"status": status,
	}
}

func renderReplicaSet(app *App, st *State, rs *ReplicaSet) map[string]any {
	hash := TemplateHash(app, rs.Template)
	name := app.Name + "-" + hash
	labels := selectorLabels(app)
	labels[LabelHash] = hash
	md := ownedBy(meta(app.Namespace, "ReplicaSet", name, rs.Created, labels), "apps/v1", "Deployment", app.Namespace, app.Name)
	md["generation"] = int64(1)
	md["annotations"] = map[string]any{
		AnnotationRevision:                          strconv.FormatInt(rs.Revision, 10),
		"deployment.kubernetes.io/desired-replicas": strconv.Itoa(int(app.Replicas)),
		"deployment.kubernetes.io/max-replicas":     strconv.Itoa(int(app.Replicas + MaxSurge(app.Replicas))),
	}
	sel := selectorLabels(app)
	sel[LabelHash] = hash
	var ready int64
	for _, p := range rs.Pods {
		if p.Ready {
			ready++
		}
	}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": md,
		"spec": map[string]any{
			"replicas": int64(rs.Replicas),
			"selector": map[string]any{"matchLabels": sel},
			"template": podTemplate(app, rs.Template, hash),
		},
		"status": map[string]any{
			"observedGeneration":   int64(1),
			"replicas":             int64(len(rs.Pods)),
			"fullyLabeledReplicas": int64(len(rs.Pods)),
			"readyReplicas":        ready,
			"availableReplicas":    ready,
		},
	}
}

func renderPod(app *App, rs *ReplicaSet, p *Pod) map[string]any {
	hash := TemplateHash(app, rs.Template)
	labels := selectorLabels(app)
	labels[LabelHash] = hash
	md := ownedBy(meta(app.Namespace, "Pod", p.Name, p.Created, labels), "apps/v1", "ReplicaSet", app.Namespace, app.Name+"-"+hash)
	if rs.Template.RestartedAt != "" {
		md["annotations"] = map[string]any{AnnotationRestartedAt: rs.Template.RestartedAt}
	}
	ctrs := containers(app, rs.Template.Tag)
	spec := map[string]any{"nodeName": nodeName(p.Name), "restartPolicy": "Always", "containers": ctrs,
		"terminationGracePeriodSeconds": int64(30)}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": podStatus(app, rs, p, ctrs)}
}

func podStatus(app *App, rs *ReplicaSet, p *Pod, ctrs []any) map[string]any {
	scheduled := ts(p.Created)
	readyAt := scheduled
	if !p.Started.IsZero() {
		readyAt = ts(p.Started)
	}
	cond := func(typ string, ok bool) map[string]any {
		c := map[string]any{"type": typ, "status": "True", "lastTransitionTime": scheduled}
		if !ok {
			c["status"], c["reason"] = "False", "ContainersNotReady"
			c["message"] = "containers with unready status: [" + app.Name + "]"
		} else if typ == "Ready" || typ == "ContainersReady" {
			c["lastTransitionTime"] = readyAt
		}
		return c
	}
	running := p.Phase == "Running"
	st := map[string]any{
		"phase":     p.Phase,
		"startTime": scheduled,
		"qosClass":  "BestEffort",
		"hostIP":    "10.0.0." + strconv.Itoa(int(hash32(nodeName(p.Name))%200)+10),
		"conditions": []any{
			cond("PodReadyToStartContainers", running), cond("Initialized", true),
			cond("Ready", p.Ready), cond("ContainersReady", p.Ready), cond("PodScheduled", true),
		},
	}
	st["hostIPs"] = []any{map[string]any{"ip": st["hostIP"]}}
	if running {
		ip := podIP(p.Name)
		st["podIP"], st["podIPs"] = ip, []any{map[string]any{"ip": ip}}
	}
	var statuses []any
	for i, c := range ctrs {
		cm := c.(map[string]any)
		image := cm["image"].(string)
		cs := map[string]any{"name": cm["name"], "image": image, "imageID": "", "restartCount": int64(0),
			"ready": false, "started": false, "lastState": map[string]any{}}
		waiting := p.Waiting
		if i > 0 && running { // a sidecar runs whenever the pod runs
			waiting = ""
		}
		switch waiting {
		case "":
			if p.Phase == "Running" {
				cs["imageID"] = strings.Split(image, ":")[0] + "@" + digest(image)
				cs["ready"], cs["started"] = p.Ready || i > 0, true
				cs["state"] = map[string]any{"running": map[string]any{"startedAt": readyAt}}
			} else {
				cs["state"] = map[string]any{"waiting": map[string]any{"reason": WaitingCreating}}
			}
		case WaitingCrashLoop:
			cs["imageID"] = strings.Split(image, ":")[0] + "@" + digest(image)
			cs["state"] = map[string]any{"waiting": map[string]any{"reason": waiting,
				"message": fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff(p.Restarts), app.Name, p.Name)}}
		case WaitingErrPull:
			cs["state"] = map[string]any{"waiting": map[string]any{"reason": waiting,
				"message": fmt.Sprintf("rpc error: code = NotFound desc = failed to pull and unpack image %q: not found", image)}}
		case WaitingPullBackOff:
			cs["state"] = map[string]any{"waiting": map[string]any{"reason": waiting,
				"message": fmt.Sprintf("Back-off pulling image %q", image)}}
		default:
			cs["state"] = map[string]any{"waiting": map[string]any{"reason": waiting}}
		}
		if i == 0 && p.Restarts > 0 {
			cs["restartCount"] = int64(p.Restarts)
			cs["lastState"] = map[string]any{"terminated": map[string]any{"exitCode": int64(p.LastExit), "reason": "Error",
				"startedAt": scheduled, "finishedAt": readyAt}}
		}
		statuses = append(statuses, cs)
	}
	st["containerStatuses"] = statuses
	return st
}

// backoff is the kubelet's crash-loop back-off after restarts: 10 s doubling
// to 5 minutes.
func backoff(restarts int32) string {
	d := 10 * time.Second
	for i := int32(1); i < restarts && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute).String()
}
