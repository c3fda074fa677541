package clustertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// nodeIP is the fake node's address, where its log server listens; pod
// IPs come from podCIDR's range.
const nodeIP = "127.0.0.1"

// PodStatusFunc decides what the fake kubelet reports for a pod bound to
// NodeName: the status to write, or false to leave the pod untouched. The
// kubelet merges the answer into the live status (conditions by type; the
// API server's own fields such as qosClass are kept), fills in the pod and
// host IPs, and writes only when something that matters changed (phase,
// each container's image, state, readiness and restarts, the conditions'
// statuses), so fresh timestamps on every call cause no churn.
type PodStatusFunc func(pod *corev1.Pod, now time.Time) (corev1.PodStatus, bool)

// DefaultPodStatus is the fake kubelet's behaviour, chosen per container by
// the suffix of its image tag (the digest, if any, is ignored):
//
//	-crash    waiting CrashLoopBackOff, restartCount 3, last exit 1 (pod Running, not Ready)
//	-badpull  waiting ImagePullBackOff (pod Pending, not Ready)
//	-unready  running but not ready, as with a failing readiness probe
//	-pending  nothing is reported: the pod stays Pending as scheduled
//	otherwise running and ready
//
// The pod is Ready when every container is; init containers are reported
// as completed.
func DefaultPodStatus(pod *corev1.Pod, now time.Time) (corev1.PodStatus, bool) {
	at := metav1.NewTime(now)
	earlier := metav1.NewTime(now.Add(-10 * time.Second))
	st := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &at}
	for _, ic := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: ic.Name, Image: ic.Image, ImageID: "fake://" + ic.Image, ContainerID: containerID(pod, ic.Name),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: at, FinishedAt: at, ContainerID: containerID(pod, ic.Name),
			}},
		})
	}
	var unready []string
	for _, ctr := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, ImageID: "fake://" + ctr.Image, ContainerID: containerID(pod, ctr.Name)}
		running := &corev1.ContainerStateRunning{StartedAt: at}
		tag := imageTag(ctr.Image)
		switch {
		case strings.HasSuffix(tag, "-pending"):
			return corev1.PodStatus{}, false
		case strings.HasSuffix(tag, "-crash"):
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off 40s restarting failed container=%s pod=%s_%s(%s)", ctr.Name, pod.Name, pod.Namespace, pod.UID)}
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				StartedAt: earlier, FinishedAt: at, ContainerID: cs.ContainerID}
			cs.RestartCount = 3
			cs.Started = new(false)
		case strings.HasSuffix(tag, "-badpull"):
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
				Message: fmt.Sprintf("Back-off pulling image %q", ctr.Image)}
			cs.ImageID, cs.ContainerID = "", ""
			cs.Started = new(false)
			st.Phase = corev1.PodPending
		case strings.HasSuffix(tag, "-unready"):
			cs.State.Running = running
			cs.Started = new(true)
		default:
			cs.State.Running = running
			cs.Started = new(true)
			cs.Ready = true
		}
		if !cs.Ready {
			unready = append(unready, ctr.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	ready, reason, message := corev1.ConditionTrue, "", ""
	if len(unready) > 0 {
		ready, reason = corev1.ConditionFalse, "ContainersNotReady"
		message = fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	}
	cond := func(typ corev1.PodConditionType, status corev1.ConditionStatus, reason, message string) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: at}
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""),
		cond(corev1.PodInitialized, corev1.ConditionTrue, "", ""),
		cond(corev1.ContainersReady, ready, reason, message),
		cond(corev1.PodReady, ready, reason, message),
		cond(corev1.PodScheduled, corev1.ConditionTrue, "", ""),
	}
	return st, true
}

func containerID(pod *corev1.Pod, name string) string {
	return fmt.Sprintf("fake://%s/%s", pod.UID, name)
}

// imageTag is the tag of an image reference: the digest is dropped, then
// the tag is what follows the last ':' after the last '/'.
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:]
	}
	return ""
}

// kubelet is the fake kubelet: one informer on the pods bound to NodeName,
// a work queue, and two workers that write pod status and finish deletions
// (a pod bound to a node is only removed once its kubelet confirms, as here).
type kubelet struct {
	client kubernetes.Interface
	pods   corelisters.PodLister
	queue  workqueue.TypedRateLimitingInterface[string]
	status PodStatusFunc

	mu  sync.Mutex
	ips map[types.UID]string
}

// startKubelet runs the fake kubelet until the cluster shuts down, and
// answers the port of its log server.
func (c *Cluster) startKubelet(t testing.TB) int {
	t.Helper()
	k := &kubelet{
		client: c.clientset,
		status: c.opts.podStatus,
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		ips:    map[types.UID]string{},
	}
	if k.status == nil {
		k.status = DefaultPodStatus
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.clientset, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + NodeName }))
	pods := factory.Core().V1().Pods()
	k.pods = pods.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		t.Fatalf("fake kubelet: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for k.next(ctx) {
			}
		})
	}
	logs := httptest.NewUnstartedServer(http.HandlerFunc(k.serveLog))
	logs.Listener.Close()
	ln, err := net.Listen("tcp", nodeIP+":0")
	if err != nil {
		t.Fatalf("fake kubelet: %v", err)
	}
	logs.Listener = ln
	logs.StartTLS()
	c.mu.Lock()
	c.stops = append(c.stops, func() {
		cancel()
		logs.CloseClientConnections()
		logs.Close()
		k.queue.ShutDown()
		wg.Wait()
		factory.Shutdown()
	})
	c.mu.Unlock()
	return ln.Addr().(*net.TCPAddr).Port
}

// serveLog is the kubelet's GET /containerLogs/{namespace}/{pod}/{container},
// which the API server calls for pods/log: a few lines naming the pod, the
// container and its image (timestamped with ?timestamps=true, the last
// tailLines of them), then, with ?follow=true, one line every second until
// the caller leaves. Nothing runs, so nothing else is logged.
func (k *kubelet) serveLog(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if r.Method != http.MethodGet || len(parts) != 3 {
		http.NotFound(w, r)
		return
	}
	pod, err := k.pods.Pods(parts[0]).Get(parts[1])
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	image := ""
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == parts[2] {
			image = ctr.Image
		}
	}
	if image == "" {
		http.Error(w, fmt.Sprintf("container %q is not in pod %q", parts[2], pod.Name), http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	stamp := q.Get("timestamps") == "true"
	line := func(at time.Time, text string) string {
		if stamp {
			return at.UTC().Format(time.RFC3339Nano) + " " + text + "\n"
		}
		return text + "\n"
	}
	start := pod.CreationTimestamp.Time
	lines := []string{
		line(start, fmt.Sprintf("fake kubelet: pod %s/%s, container %s", pod.Namespace, pod.Name, parts[2])),
		line(start, "fake kubelet: image "+image),
		line(start, "fake kubelet: nothing runs here; this log is all there is"),
	}
	if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n >= 0 && n < len(lines) {
		lines = lines[len(lines)-n:]
	}
	w.Header().Set("Content-Type", "text/plain")
	for _, l := range lines {
		io.WriteString(w, l)
	}
	if q.Get("follow") != "true" {
		return
	}
	f, _ := w.(http.Flusher)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 1; ; i++ {
		if f != nil {
			f.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case now := <-tick.C:
			io.WriteString(w, line(now, fmt.Sprintf("fake kubelet: still here (%d)", i)))
		}
	}
}

// next handles one queued pod; false once the queue is shut down.
func (k *kubelet) next(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil && ctx.Err() == nil {
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func (k *kubelet) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		uid := pod.UID
		err := k.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	want, ok := k.status(pod, time.Now())
	if !ok {
		return nil
	}
	next := mergePodStatus(pod.Status, want)
	if next.PodIP == "" {
		ip := k.ipFor(pod.UID)
		next.PodIP, next.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	if next.HostIP == "" {
		next.HostIP, next.HostIPs = nodeIP, []corev1.HostIP{{IP: nodeIP}}
	}
	next.ObservedGeneration = pod.Generation
	if statusKey(pod.Status) == statusKey(next) {
		return nil
	}
	update := pod.DeepCopy()
	update.Status = next
	_, err = k.client.CoreV1().Pods(ns).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ipFor gives each pod its own address in 10.244.0.0/16, stable for its life.
func (k *kubelet) ipFor(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ip, ok := k.ips[uid]; ok {
		return ip
	}
	n := len(k.ips)
	ip := fmt.Sprintf("10.244.%d.%d", n/250%256, n%250+2)
	k.ips[uid] = ip
	return ip
}

// mergePodStatus lays want over the live status: phase, reason, message and
// container statuses are replaced, conditions merged by type (keeping the
// transition time of one whose status did not change), the rest kept.
func mergePodStatus(live, want corev1.PodStatus) corev1.PodStatus {
	out := *live.DeepCopy()
	out.Phase, out.Reason, out.Message = want.Phase, want.Reason, want.Message
	out.ContainerStatuses = want.ContainerStatuses
	out.InitContainerStatuses = want.InitContainerStatuses
	if out.StartTime == nil {
		out.StartTime = want.StartTime
	}
	if want.PodIP != "" {
		out.PodIP, out.PodIPs = want.PodIP, want.PodIPs
	}
	if want.HostIP != "" {
		out.HostIP, out.HostIPs = want.HostIP, want.HostIPs
	}
	for _, wc := range want.Conditions {
		i := slices.IndexFunc(out.Conditions, func(c corev1.PodCondition) bool { return c.Type == wc.Type })
		if i < 0 {
			out.Conditions = append(out.Conditions, wc)
			continue
		}
		if out.Conditions[i].Status == wc.Status {
			wc.LastTransitionTime = out.Conditions[i].LastTransitionTime
		}
		out.Conditions[i] = wc
	}
	return out
}

// statusKey is what of a pod status the fake kubelet compares before writing.
func statusKey(s corev1.PodStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s|%s|%d", s.Phase, s.Reason, s.PodIP, s.HostIP, s.ObservedGeneration)
	for _, list := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		b.WriteString("|")
		for _, cs := range list {
			state := "none"
			switch {
			case cs.State.Waiting != nil:
				state = "waiting:" + cs.State.Waiting.Reason
			case cs.State.Running != nil:
				state = "running"
			case cs.State.Terminated != nil:
				state = fmt.Sprintf("terminated:%s:%d", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			}
			fmt.Fprintf(&b, "%s=%s,%t,%d,%s;", cs.Name, cs.Image, cs.Ready, cs.RestartCount, state)
		}
	}
	conds := make([]string, 0, len(s.Conditions))
	for _, c := range s.Conditions {
		conds = append(conds, string(c.Type)+"="+string(c.Status))
	}
	slices.Sort(conds)
	b.WriteString("|" + strings.Join(conds, ","))
	return b.String()
}
