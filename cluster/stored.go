package cluster

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/hanzoai/deploy/projection"
)

// stored is what an informer's cache holds for one object: the projection's
// own summary of it. The informer and the projection share it (neither
// mutates an Object), so an object costs one compact summary however many
// hold it, and it is decoded once, when it arrives. Objects of namespaces
// outside the map, and objects that could not be read, keep their identity
// alone and produce no changes.
type stored struct {
	// obj is held by value: the projection is handed &obj, so an object
	// is one allocation, not a summary and a wrapper pointing at it.
	obj  projection.Object
	fold bool // in a watched namespace, and decoded
}

// decoder returns the informer transform of one kind: the object as it came
// from the API server (unstructured, typed, or its metadata alone) becomes
// its summary before anything stores it, so no full object (managedFields,
// annotations, specs) outlives its decoding.
func decoder(kind projection.Kind, watched func(namespace string) bool, undecoded func(obj metav1.Object, err error)) cache.TransformFunc {
	return func(in any) (any, error) {
		var id metav1.Object
		var err error
		switch t := in.(type) {
		case *stored:
			return t, nil // already transformed
		case *unstructured.Unstructured:
			id = t
			if watched(t.GetNamespace()) {
				var o *projection.Object
				if o, err = projection.DecodeKind(kind, t.Object); err == nil && o != nil {
					return &stored{obj: *o, fold: true}, nil
				}
			}
		case metav1.Object:
			id = t
			if watched(t.GetNamespace()) {
				st := &stored{fold: true}
				switch {
				case !decodeBuiltinInto(kind, t, &st.obj):
					err = fmt.Errorf("%T is not a %s", in, kind)
				case st.obj.Name == "":
					err = errors.New("object has no metadata.name")
				default:
					return st, nil
				}
			}
		default:
			return in, nil // a tombstone
		}
		if err != nil {
			undecoded(id, err)
		}
		return &stored{obj: projection.Object{
			Kind: kind, Namespace: id.GetNamespace(), Name: id.GetName(),
			UID: string(id.GetUID()), ResourceVersion: id.GetResourceVersion(),
		}}, nil
	}
}

// The informer machinery reads an object's identity and version through
// metav1.Object (keys, and telling a relist's unchanged objects from
// updates); the rest of the interface reads as empty and ignores writes.
var (
	_ metav1.Object  = (*stored)(nil)
	_ runtime.Object = (*stored)(nil)
)

func (s *stored) GetNamespace() string                          { return s.obj.Namespace }
func (s *stored) GetName() string                               { return s.obj.Name }
func (s *stored) GetUID() types.UID                             { return types.UID(s.obj.UID) }
func (s *stored) GetResourceVersion() string                    { return s.obj.ResourceVersion }
func (s *stored) GetGeneration() int64                          { return s.obj.Generation }
func (s *stored) GetGenerateName() string                       { return "" }
func (s *stored) GetSelfLink() string                           { return "" }
func (s *stored) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (s *stored) GetDeletionTimestamp() *metav1.Time            { return nil }
func (s *stored) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (s *stored) GetLabels() map[string]string                  { return nil }
func (s *stored) GetAnnotations() map[string]string             { return nil }
func (s *stored) GetFinalizers() []string                       { return nil }
func (s *stored) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (s *stored) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (s *stored) SetNamespace(string)                           {}
func (s *stored) SetName(string)                                {}
func (s *stored) SetGenerateName(string)                        {}
func (s *stored) SetUID(types.UID)                              {}
func (s *stored) SetResourceVersion(string)                     {}
func (s *stored) SetGeneration(int64)                           {}
func (s *stored) SetSelfLink(string)                            {}
func (s *stored) SetCreationTimestamp(metav1.Time)              {}
func (s *stored) SetDeletionTimestamp(*metav1.Time)             {}
func (s *stored) SetDeletionGracePeriodSeconds(*int64)          {}
func (s *stored) SetLabels(map[string]string)                   {}
func (s *stored) SetAnnotations(map[string]string)              {}
func (s *stored) SetFinalizers([]string)                        {}
func (s *stored) SetOwnerReferences([]metav1.OwnerReference)    {}
func (s *stored) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
func (s *stored) GetObjectKind() schema.ObjectKind              { return schema.EmptyObjectKind }
func (s *stored) DeepCopyObject() runtime.Object                { c := *s; return &c }

// qualified wraps a kind's transform so that the summaries it makes carry
// the cluster's qualified namespace (projection.QualifyNamespace); the
// informer's keys are then qualified too. The first cluster's (cluster "")
// is the transform itself.
func qualified(tf cache.TransformFunc, cluster string) cache.TransformFunc {
	if cluster == "" {
		return tf
	}
	return func(in any) (any, error) {
		if _, done := in.(*stored); done {
			return in, nil // qualified when it was transformed
		}
		out, err := tf(in)
		if s, ok := out.(*stored); ok && err == nil {
			s.obj.Namespace = projection.QualifyNamespace(s.obj.Namespace, cluster)
		}
		return out, err
	}
}

// watched reports whether the watcher folds objects of a namespace as the
// projection names it (qualified for a cluster other than the first).
func (w *Watcher) watched(q string) bool {
	ns := q
	if w.opts.Cluster != "" {
		var cluster string
		if ns, cluster = projection.SplitNamespace(q); cluster != w.opts.Cluster {
			return false
		}
	}
	return w.opts.Namespaces.Watched(ns)
}
