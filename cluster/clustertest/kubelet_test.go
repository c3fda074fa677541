package clustertest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"nginx":                                 "",
		"nginx:1.27":                            "1.27",
		"ghcr.io/hanzoai/iam:v1.2.3-crash":      "v1.2.3-crash",
		"localhost:5000/iam":                    "",
		"localhost:5000/iam:v1-badpull":         "v1-badpull",
		"ghcr.io/hanzoai/iam:v1.2.3@sha256:abc": "v1.2.3",
		"ghcr.io/hanzoai/iam@sha256:abc":        "",
	} {
		if got := imageTag(image); got != want {
			t.Errorf("imageTag(%q): got %q, want %q", image, got, want)
		}
	}
}

func TestDefaultPodStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		image                       string
		write                       bool
		phase                       corev1.PodPhase
		ready                       corev1.ConditionStatus
		state, waitingReason        string
		restarts                    int32
		containerReady, wantStarted bool
	}{
		{image: "ghcr.io/hanzoai/web:v1", write: true, phase: corev1.PodRunning, ready: corev1.ConditionTrue, state: "running", containerReady: true, wantStarted: true},
		{image: "ghcr.io/hanzoai/web:v1-crash", write: true, phase: corev1.PodRunning, ready: corev1.ConditionFalse, state: "waiting", waitingReason: "CrashLoopBackOff", restarts: 3},
		{image: "ghcr.io/hanzoai/web:v1-badpull", write: true, phase: corev1.PodPending, ready: corev1.ConditionFalse, state: "waiting", waitingReason: "ImagePullBackOff"},
		{image: "ghcr.io/hanzoai/web:v1-unready", write: true, phase: corev1.PodRunning, ready: corev1.ConditionFalse, state: "running", wantStarted: true},
		{image: "ghcr.io/hanzoai/web:v1-pending", write: false},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "hanzo", UID: "u1"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: tt.image}}},
			}
			st, write := DefaultPodStatus(pod, now)
			if write != tt.write {
				t.Fatalf("write: got %t, want %t", write, tt.write)
			}
			if !write {
				return
			}
			if st.Phase != tt.phase {
				t.Errorf("phase: got %s, want %s", st.Phase, tt.phase)
			}
			if got := condition(st, corev1.PodReady); got != tt.ready {
				t.Errorf("Ready: got %s, want %s", got, tt.ready)
			}
			if len(st.ContainerStatuses) != 1 {
				t.Fatalf("container statuses: got %d, want 1", len(st.ContainerStatuses))
			}
			cs := st.ContainerStatuses[0]
			state, reason := "running", ""
			if cs.State.Waiting != nil {
				state, reason = "waiting", cs.State.Waiting.Reason
			}
			if cs.Image != tt.image || state != tt.state || reason != tt.waitingReason || cs.RestartCount != tt.restarts ||
				cs.Ready != tt.containerReady || cs.Started == nil || *cs.Started != tt.wantStarted {
				t.Errorf("container: got image %s %s %q restarts %d ready %t started %v, want %s %s %q restarts %d ready %t started %t",
					cs.Image, state, reason, cs.RestartCount, cs.Ready, cs.Started,
					tt.image, tt.state, tt.waitingReason, tt.restarts, tt.containerReady, tt.wantStarted)
			}
		})
	}
}

func condition(st corev1.PodStatus, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// The kubelet writes only when something that matters changed, and keeps
// what the API server and the scheduler wrote.
func TestMergePodStatusIsStable(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "hanzo", UID: "u1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "web:v1"}}},
		Status: corev1.PodStatus{
			Phase:    corev1.PodPending,
			QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))},
			},
		},
	}
	first, _ := DefaultPodStatus(pod, t0)
	merged := mergePodStatus(pod.Status, first)
	if merged.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("qosClass: got %q, want it kept", merged.QOSClass)
	}
	if got := merged.Conditions[0].LastTransitionTime.Time; !got.Equal(t0.Add(-time.Minute)) {
		t.Errorf("PodScheduled transition time: got %v, want the scheduler's", got)
	}
	if statusKey(pod.Status) == statusKey(merged) {
		t.Errorf("a pending pod and a running one have the same key %q", statusKey(merged))
	}
	later, _ := DefaultPodStatus(pod, t0.Add(time.Hour))
	again := mergePodStatus(merged, later)
	if diff := cmp.Diff(statusKey(merged), statusKey(again)); diff != "" {
		t.Errorf("key changed with nothing but time (-first +later):\n%s", diff)
	}
	pod.Spec.Containers[0].Image = "web:v1-crash"
	crashed, _ := DefaultPodStatus(pod, t0.Add(time.Hour))
	if statusKey(merged) == statusKey(mergePodStatus(merged, crashed)) {
		t.Errorf("a crash did not change the key")
	}
}
