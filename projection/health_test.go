package projection

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// healthFixtureDir holds one object per file, named <kind>-<case>.yaml, each
// carrying its expected health in two annotations.
const healthFixtureDir = "testdata/health"

const (
	annotationWantStatus  = "health.test/status"
	annotationWantMessage = "health.test/message" // absent: an empty message
)

// healthFixtureKinds maps a fixture file's prefix to the kind it must hold.
var healthFixtureKinds = map[string]Kind{
	"app":         KindApp,
	"deployment":  KindDeployment,
	"statefulset": KindStatefulSet,
	"replicaset":  KindReplicaSet,
	"daemonset":   KindDaemonSet,
	"pod":         KindPod,
	"service":     KindService,
	"ingress":     KindIngress,
	"pvc":         KindPVC,
	"hpa":         KindHPA,
	"job":         KindJob,
}

type healthFixture struct {
	file   string
	object *Object
	want   Health
}

// loadHealthFixtures reads every entry of healthFixtureDir and fails the test
// on any it cannot use: a fixture that is not a YAML object, has an unknown
// prefix, holds another kind, or lacks a valid expected status.
func loadHealthFixtures(t *testing.T) []healthFixture {
	t.Helper()
	entries, err := os.ReadDir(healthFixtureDir)
	if err != nil {
		t.Fatalf("read %s: %v", healthFixtureDir, err)
	}
	out := make([]healthFixture, 0, len(entries))
	for _, e := range entries {
		out = append(out, loadHealthFixture(t, e.Name()))
	}
	return out
}

func loadHealthFixture(t *testing.T, file string) healthFixture {
	t.Helper()
	prefix, _, _ := strings.Cut(file, "-")
	wantKind, known := healthFixtureKinds[prefix]
	if !known || !strings.HasSuffix(file, ".yaml") || !strings.Contains(file, "-") {
		t.Fatalf("fixture %s: want a name <kind>-<case>.yaml with kind one of the rule kinds", file)
	}
	raw, err := os.ReadFile(filepath.Join(healthFixtureDir, file))
	if err != nil {
		t.Fatalf("fixture %s: %v", file, err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("fixture %s: parse: %v", file, err)
	}
	o, err := Decode(obj)
	if err != nil {
		t.Fatalf("fixture %s: decode: %v", file, err)
	}
	if o.Kind != wantKind {
		t.Fatalf("fixture %s: got kind %v, want %v", file, o.Kind, wantKind)
	}
	ann := m(m(obj, "metadata"), "annotations")
	status, ok := ann[annotationWantStatus].(string)
	if !ok || !validHealthCode(HealthCode(status)) {
		t.Fatalf("fixture %s: annotation %s is %v, want a health code", file, annotationWantStatus, ann[annotationWantStatus])
	}
	msg, _ := ann[annotationWantMessage].(string)
	return healthFixture{file: file, object: o, want: Health{Status: HealthCode(status), Message: msg}}
}

func validHealthCode(c HealthCode) bool {
	switch c {
	case HealthHealthy, HealthProgressing, HealthDegraded, HealthSuspended, HealthMissing, HealthUnknown:
		return true
	}
	return false
}

func TestHealthFixtures(t *testing.T) {
	for _, f := range loadHealthFixtures(t) {
		t.Run(strings.TrimSuffix(f.file, ".yaml"), func(t *testing.T) {
			got, ok := ObjectHealth(f.object)
			if !ok {
				t.Fatalf("fixture %s: got no health rule for %v, want one", f.file, f.object.Kind)
			}
			if got != f.want {
				t.Errorf("fixture %s: got %s %q, want %s %q", f.file, got.Status, got.Message, f.want.Status, f.want.Message)
			}
		})
	}
}

// TestHealthFixtureDirectory checks that TestHealthFixtures runs every file of
// the directory, that there are enough of them, and that every kind with a
// rule has at least one.
func TestHealthFixtureDirectory(t *testing.T) {
	entries, err := os.ReadDir(healthFixtureDir)
	if err != nil {
		t.Fatalf("read %s: %v", healthFixtureDir, err)
	}
	var inDir []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			t.Errorf("fixture %s: got a %v, want a regular file", e.Name(), e.Type())
		}
		inDir = append(inDir, e.Name())
	}

	fixtures := loadHealthFixtures(t)
	used := make([]string, 0, len(fixtures))
	perKind := map[Kind]int{}
	for _, f := range fixtures {
		used = append(used, f.file)
		perKind[f.object.Kind]++
	}
	if diff := cmp.Diff(inDir, used); diff != "" {
		t.Errorf("fixtures run differ from files in %s (-dir +run):\n%s", healthFixtureDir, diff)
	}
	if got, want := len(used), 50; got < want {
		t.Errorf("got %d fixtures, want at least %d", got, want)
	}
	for prefix, k := range healthFixtureKinds {
		if perKind[k] == 0 {
			t.Errorf("got no fixture for %v, want at least one %s-<case>.yaml", k, prefix)
		}
	}
}

// TestHealthRulesWithoutSummary checks that every rule answers Unknown, with
// a message, instead of panicking when the summary is missing or of another
// kind.
func TestHealthRulesWithoutSummary(t *testing.T) {
	rules := []struct {
		name     string
		rule     func(*Object) Health
		kind     Kind
		typedNil any
	}{
		{"AppHealth", AppHealth, KindApp, (*AppSpec)(nil)},
		{"DeploymentHealth", DeploymentHealth, KindDeployment, (*WorkloadSpec)(nil)},
		{"StatefulSetHealth", StatefulSetHealth, KindStatefulSet, (*WorkloadSpec)(nil)},
		{"ReplicaSetHealth", ReplicaSetHealth, KindReplicaSet, (*WorkloadSpec)(nil)},
		{"DaemonSetHealth", DaemonSetHealth, KindDaemonSet, (*WorkloadSpec)(nil)},
		{"PodHealth", PodHealth, KindPod, (*PodSpec)(nil)},
		{"ServiceHealth", ServiceHealth, KindService, (*ServiceSpec)(nil)},
		{"IngressHealth", IngressHealth, KindIngress, (*IngressSpec)(nil)},
		{"PVCHealth", PVCHealth, KindPVC, (*PVCSpec)(nil)},
		{"HPAHealth", HPAHealth, KindHPA, (*HPASpec)(nil)},
		{"JobHealth", JobHealth, KindJob, (*JobSpec)(nil)},
	}
	specs := []struct {
		name string
		spec func(typedNil any) any
	}{
		{"nil", func(any) any { return nil }},
		{"typed nil", func(typedNil any) any { return typedNil }},
		{"wrong type", func(any) any { return &MiddlewareSpec{StaticRoot: "/srv"} }},
	}
	for _, r := range rules {
		for _, s := range specs {
			t.Run(r.name+"/"+s.name, func(t *testing.T) {
				o := &Object{Kind: r.kind, Namespace: "hanzo", Name: "web", Spec: s.spec(r.typedNil)}
				got := r.rule(o)
				if got.Status != HealthUnknown || got.Message == "" {
					t.Errorf("%s(Spec %T): got %s %q, want Unknown with a message", r.name, o.Spec, got.Status, got.Message)
				}
				if got, _ := ObjectHealth(o); got.Status != HealthUnknown {
					t.Errorf("ObjectHealth(Spec %T): got %s, want Unknown", o.Spec, got.Status)
				}
			})
		}
	}
}

func TestHealthCodeWorse(t *testing.T) {
	order := []HealthCode{HealthHealthy, HealthSuspended, HealthProgressing, HealthMissing, HealthDegraded, HealthUnknown}
	for i, a := range order {
		for j, b := range order {
			if got, want := a.Worse(b), i > j; got != want {
				t.Errorf("%s.Worse(%s): got %v, want %v", a, b, got, want)
			}
		}
	}
	unrecognised := HealthCode("Bogus")
	for _, c := range order {
		want := c != HealthUnknown // ranks with Unknown
		if got := unrecognised.Worse(c); got != want {
			t.Errorf("%s.Worse(%s): got %v, want %v", unrecognised, c, got, want)
		}
	}
}

// ExampleAppHealth shows the phase-prefixed messages of an App midway through
// a rollout.
func ExampleAppHealth() {
	o := &Object{Kind: KindApp, Name: "web", Generation: 3, Spec: &AppSpec{
		Replicas: 3, HasStatus: true, Phase: "Running", ObservedGeneration: 3, ReadyReplicas: 1,
	}}
	fmt.Println(AppHealth(o))
	// Output: {Progressing Running: rolling out: 1/3 ready}
}
