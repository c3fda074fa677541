package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/projection"
)

// builtinKinds are the kinds read typed, each with an empty object of its
// type; metaOnly kinds are read as their metadata alone.
var builtinKinds = []struct {
	kind     projection.Kind
	new      func() metav1.Object
	metaOnly bool
}{
	{projection.KindDeployment, func() metav1.Object { return &appsv1.Deployment{} }, false},
	{projection.KindStatefulSet, func() metav1.Object { return &appsv1.StatefulSet{} }, false},
	{projection.KindReplicaSet, func() metav1.Object { return &appsv1.ReplicaSet{} }, false},
	{projection.KindPod, func() metav1.Object { return &corev1.Pod{} }, false},
	{projection.KindService, func() metav1.Object { return &corev1.Service{} }, false},
	{projection.KindIngress, func() metav1.Object { return &networkingv1.Ingress{} }, false},
	{projection.KindHPA, func() metav1.Object { return &autoscalingv2.HorizontalPodAutoscaler{} }, false},
	{projection.KindConfigMap, func() metav1.Object { return &corev1.ConfigMap{} }, true},
	{projection.KindPDB, func() metav1.Object { return &policyv1.PodDisruptionBudget{} }, true},
}

// TestBuiltinSourcesCoverTheRegistry: every registry kind that is not a CRD
// is read through a typed or metadata source, and each source's object type
// is the one decodeBuiltin reads.
func TestBuiltinSourcesCoverTheRegistry(t *testing.T) {
	covered := map[projection.Kind]bool{}
	for _, b := range builtinKinds {
		covered[b.kind] = true
	}
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // never called
	cs, md := kubernetes.NewForConfigOrDie(cfg), metadata.NewForConfigOrDie(cfg)
	for _, ki := range projection.Registry() {
		builtin := !ki.Optional && ki.Kind != projection.KindApp // not a CRD
		lw, example := builtinSource(cs, md, ki.Kind)
		if (lw != nil) != builtin {
			t.Errorf("%s: typed source %v, want %v", ki.Name, lw != nil, builtin)
		}
		if builtin != covered[ki.Kind] {
			t.Errorf("%s: built-in %v, but covered by the agreement tests %v", ki.Name, builtin, covered[ki.Kind])
		}
		if !builtin {
			continue
		}
		if example == nil {
			t.Errorf("%s: no typed source", ki.Name)
			continue
		}
		if _, ok := decodeBuiltin(ki.Kind, example.(metav1.Object)); !ok {
			t.Errorf("%s: the source's %T is not what decodeBuiltin reads", ki.Name, example)
		}
	}
}

// agree fails the test when the typed decoding of obj differs from the
// projection's decoding of the same object in its JSON form.
func agree(t *testing.T, k projection.Kind, obj metav1.Object, metaOnly bool, what string) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want, err := projection.DecodeKind(k, m)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var in metav1.Object = obj
	if metaOnly {
		in = &metav1.PartialObjectMetadata{ObjectMeta: *obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)}
	}
	got, ok := decodeBuiltin(k, in)
	if !ok {
		t.Fatalf("%s: %T not read as a %s", what, in, k)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: typed decoding differs from the JSON one (-json +typed):\n%s", what, diff)
	}
}

// TestBuiltinDecodingAgreesOnRandomObjects: objects of every built-in kind
// with every field filled at random decode to the same summary typed (as
// read in protobuf) and unstructured (as read in JSON).
func TestBuiltinDecodingAgreesOnRandomObjects(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0.25).NumElements(0, 3).MaxDepth(7).
		SkipFieldsWithPattern(regexp.MustCompile(`^ManagedFields$`)).
		Funcs(
			// An API server only sends valid times, quantities and
			// int-or-strings; JSON has no form for the others.
			func(tm *metav1.Time, c randfill.Continue) {
				*tm = metav1.Unix(1+c.Int63n(4_000_000_000), 0)
			},
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
			},
			func(v *intstr.IntOrString, c randfill.Continue) { *v = intstr.FromInt32(c.Int31n(100)) },
			// Phrases the decoders compare against appear often enough
			// to matter.
			func(s *corev1.RestartPolicy, c randfill.Continue) {
				*s = corev1.RestartPolicy([]string{"", "Always", "OnFailure", "Never"}[c.Intn(4)])
			},
			func(s *corev1.PodConditionType, c randfill.Continue) {
				*s = corev1.PodConditionType([]string{"Ready", "PodScheduled", "ContainersReady"}[c.Intn(3)])
			},
			func(s *corev1.ConditionStatus, c randfill.Continue) {
				*s = corev1.ConditionStatus([]string{"True", "False", "Unknown"}[c.Intn(3)])
			},
			func(s *metav1.LabelSelectorOperator, c randfill.Continue) {
				*s = metav1.LabelSelectorOperator([]string{"In", "NotIn", "Exists", "DoesNotExist", "Bogus"}[c.Intn(5)])
			},
			func(m *map[string]string, c randfill.Continue) {
				*m = map[string]string{}
				for range c.Intn(3) {
					(*m)[c.String(8)] = c.String(8)
				}
				if c.Intn(3) == 0 {
					(*m)[projection.AnnotationRevision] = fmt.Sprint(c.Intn(12) - 1)
				}
			},
		)
	for _, b := range builtinKinds {
		t.Run(b.kind.String(), func(t *testing.T) {
			for i := range 200 {
				obj := b.new()
				f.Fill(obj)
				obj.SetName(fmt.Sprintf("obj-%d", i)) // both paths refuse a nameless object
				agree(t, b.kind, obj, b.metaOnly, fmt.Sprintf("random %s #%d", b.kind, i))
			}
		})
	}
}

// TestBuiltinDecodingAgreesOnFixtures: every health fixture of a built-in
// kind (crash loops, stuck rollouts, load balancers…) decodes the same typed
// and unstructured.
func TestBuiltinDecodingAgreesOnFixtures(t *testing.T) {
	dir := filepath.Join("..", "projection", "testdata", "health")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	builtin := map[projection.Kind]bool{}
	for _, b := range builtinKinds {
		builtin[b.kind] = true
	}
	decode := scheme.Codecs.UniversalDeserializer()
	checked := map[projection.Kind]int{}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		o, err := projection.Decode(m)
		if err != nil || !builtin[o.Kind] {
			continue // CRDs and kinds outside the registry are read unstructured
		}
		obj, _, err := decode.Decode(raw, nil, nil)
		if err != nil {
			t.Fatalf("%s: not a valid %s: %v", e.Name(), o.Kind, err)
		}
		agree(t, o.Kind, obj.(metav1.Object), false, e.Name())
		checked[o.Kind]++
	}
	for _, k := range []projection.Kind{projection.KindDeployment, projection.KindStatefulSet, projection.KindReplicaSet, projection.KindPod, projection.KindService, projection.KindIngress, projection.KindHPA} {
		if checked[k] == 0 {
			t.Errorf("no fixture of %s was checked", k)
		}
	}
}
