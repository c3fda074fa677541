package engine

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/projection"
)

// Policy decides, before any request, which rendered objects the engine may
// send to the API server.
type Policy struct {
	Allow            []projection.Kind
	Namespaces       projection.Namespaces
	DefaultNamespace string
}

// Admit fills in the default namespace of an allowed kind that names none,
// then checks the rules in order: the kind is on the allow-list, the
// namespace is in the map, and in a tenant namespace the object's org label
// is the tenant's org. It returns the object's kind, or a refusal that names
// the rule (the object must then not be sent).
func (p Policy) Admit(u *unstructured.Unstructured) (projection.Kind, error) {
	k := projection.LookupKindByAPIVersion(u.GetAPIVersion(), u.GetKind())
	if k == projection.KindUnknown || !p.allowed(k) {
		return k, fmt.Errorf("policy: %s %s is not on the engine's allow-list (%s)", u.GetAPIVersion(), u.GetKind(), p.allowList())
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(p.DefaultNamespace)
	}
	ns := u.GetNamespace()
	_, org, ok := p.Namespaces.Env(ns)
	if !ok {
		return k, fmt.Errorf("policy: namespace %q is not in the namespace map (DEPLOY_NAMESPACES)", ns)
	}
	if org != "" {
		got, has := u.GetLabels()[projection.LabelOrg]
		switch {
		case !has:
			return k, fmt.Errorf("policy: in namespace %s the label %s must be %q (it is missing)", ns, projection.LabelOrg, org)
		case got != org:
			return k, fmt.Errorf("policy: in namespace %s the label %s must be %q (it is %q)", ns, projection.LabelOrg, org, got)
		}
	}
	return k, nil
}

func (p Policy) allowed(k projection.Kind) bool {
	for _, a := range p.Allow {
		if a == k {
			return true
		}
	}
	return false
}

func (p Policy) allowList() string {
	parts := make([]string, 0, len(p.Allow))
	for _, k := range p.Allow {
		ki := k.Info()
		parts = append(parts, ki.Group+"/"+ki.Version+" "+ki.Name)
	}
	return strings.Join(parts, ", ")
}

// resourceOf spells an object as the report does:
// group/version/kind/namespace/name, the core group and a cluster-scoped
// namespace empty.
func resourceOf(u *unstructured.Unstructured) string {
	gv := u.GetAPIVersion()
	if !strings.Contains(gv, "/") {
		gv = "/" + gv
	}
	return gv + "/" + u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// resourceOfKind spells a live object of a known kind.
func resourceOfKind(k projection.Kind, namespace, name string) string {
	ki := k.Info()
	return ki.Group + "/" + ki.Version + "/" + ki.Name + "/" + namespace + "/" + name
}
