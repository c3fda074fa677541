package clustertest

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// NodeName is the fake node StartControllers registers; the scheduler binds
// every pod to it and the fake kubelet reports their status.
const NodeName = "clustertest-node"

// StartControllers starts kube-controller-manager (every controller but the
// node-lifecycle one, which would mark the heartbeat-less node NotReady) and
// kube-scheduler, registers NodeName as a Ready node with room for 250 pods,
// and runs the fake kubelet (see PodStatusFunc and DefaultPodStatus). After
// it, a Deployment rolls out as it would on a real cluster: ReplicaSets,
// pods scheduled, Running and Ready, Available; the garbage collector and
// the namespace controller work too. Calling it again does nothing.
func (c *Cluster) StartControllers(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	started := c.controllers
	c.controllers = true
	c.mu.Unlock()
	if started {
		return
	}
	kcmBin := binary(t, "kube-controller-manager")
	schedBin := binary(t, "kube-scheduler")
	began := time.Now()

	c.registerNode(t, c.startKubelet(t))
	kcm := c.startComponent(t, "kube-controller-manager", kcmBin, func(port int) []string {
		return []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig,
			"--authorization-kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", port),
			"--cert-dir=" + filepath.Join(c.Dir, "kube-controller-manager-certs"),
			"--service-account-private-key-file=" + c.pki.saKey,
			"--root-ca-file=" + c.pki.caFile,
			"--use-service-account-credentials=false",
			"--controllers=*,-node-lifecycle-controller",
		}
	})
	sched := c.startComponent(t, "kube-scheduler", schedBin, func(port int) []string {
		return []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig,
			"--authorization-kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", port),
			"--cert-dir=" + filepath.Join(c.Dir, "kube-scheduler-certs"),
		}
	})
	t.Logf("controllers ready in %v (kube-controller-manager pid %d, kube-scheduler pid %d, node %s)",
		time.Since(began).Round(time.Millisecond), kcm.pid(), sched.pid(), NodeName)
}

// startComponent runs a control-plane binary serving /healthz on a free
// port (retrying on a port race) and waits until it answers 200.
func (c *Cluster) startComponent(t testing.TB, name, bin string, args func(port int) []string) *process {
	t.Helper()
	insecure := &http.Client{
		Timeout: 2 * time.Second,
		// The component's serving certificate is self-signed into its
		// cert dir; only its liveness matters here.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
	}
	deadline := time.Now().Add(startBudget)
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		p := newProcess(name, bin, filepath.Join(c.Dir, name+".log"), args(ports[0]))
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		c.own(p)
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
		err = poll(deadline, p, func() bool {
			resp, err := insecure.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		if err == nil {
			return p
		}
		p.stop(syscall.SIGKILL, time.Second)
		if p.exitedWithBindError() && attempt < 5 {
			continue
		}
		t.Fatalf("%s not healthy: %v\n%s", name, err, p.tail(30))
	}
}

// registerNode creates NodeName, reports it Ready with capacity and its
// kubelet's port (the fake kubelet's log server, at nodeIP), and lifts
// the not-ready taint the API server puts on every new node (the
// node-lifecycle controller, which would lift it, is not running).
func (c *Cluster) registerNode(t testing.TB, kubeletPort int) {
	t.Helper()
	ctx := t.Context()
	nodes := c.clientset.CoreV1().Nodes()
	_, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: NodeName,
		Labels: map[string]string{
			"kubernetes.io/hostname": NodeName,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason string) corev1.NodeCondition {
			return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: "fake kubelet",
				LastHeartbeatTime: now, LastTransitionTime: now}
		}
		node.Status = corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			},
			// The API server reaches the kubelet (pods/log) at the first
			// address of its preferred types, Hostname first: so no
			// Hostname, which would not resolve.
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(kubeletPort)}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "fake://0",
			},
		}
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("report node ready: %v", err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := node.Spec.Taints[:0]
		for _, taint := range node.Spec.Taints {
			if taint.Key != corev1.TaintNodeNotReady {
				kept = append(kept, taint)
			}
		}
		node.Spec.Taints = kept
		_, err = nodes.Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("lift the not-ready taint: %v", err)
	}
}
