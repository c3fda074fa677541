package projection

import "strconv"

// NativeRow is the native /v1/deploy application row: what each app
// declares, what runs, its health and its sync verdict.
type NativeRow struct {
	Name            string   `json:"name"`
	Namespace       string   `json:"namespace"`
	Kind            string   `json:"kind"` // app, site, cd
	Env             string   `json:"env"`
	Org             string   `json:"org,omitempty"`
	Project         string   `json:"project"`
	Role            string   `json:"role,omitempty"`
	Repository      string   `json:"repository,omitempty"`
	Declared        string   `json:"declared"`
	Running         string   `json:"running"`
	Sync            SyncCode `json:"sync"`
	Health          string   `json:"health"`
	HealthMessage   string   `json:"healthMessage,omitempty"`
	Phase           string   `json:"phase,omitempty"`
	Replicas        int32    `json:"replicas"`
	ReadyReplicas   int32    `json:"readyReplicas"`
	Endpoints       []string `json:"endpoints"`
	CreatedAt       string   `json:"createdAt,omitempty"`
	ResourceVersion string   `json:"resourceVersion"`
}

// NativeNode is one node of the native tree, with its ref token and its
// parents' ref tokens.
type NativeNode struct {
	Ref             string   `json:"ref"`
	Group           string   `json:"group,omitempty"`
	Version         string   `json:"version"`
	Kind            string   `json:"kind"`
	Namespace       string   `json:"namespace"`
	Name            string   `json:"name"`
	UID             string   `json:"uid,omitempty"`
	Parents         []string `json:"parents"`
	Health          string   `json:"health,omitempty"`
	HealthMessage   string   `json:"healthMessage,omitempty"`
	Sync            SyncCode `json:"sync,omitempty"`
	Images          []string `json:"images,omitempty"`
	Tag             string   `json:"tag,omitempty"`
	CreatedAt       string   `json:"createdAt,omitempty"`
	ResourceVersion string   `json:"resourceVersion,omitempty"`
}

// NativeTree is the answer of the native tree route.
type NativeTree struct {
	Application NativeRow    `json:"application"`
	Nodes       []NativeNode `json:"nodes"`
}

// Native returns the row in the native form.
func (a *App) Native() NativeRow {
	return NativeRow{
		Name:            a.Name,
		Namespace:       a.Namespace,
		Kind:            a.Row.String(),
		Env:             a.Env,
		Org:             a.Org,
		Project:         a.Project,
		Role:            a.Role,
		Repository:      a.Repository,
		Declared:        a.Declared,
		Running:         a.Running,
		Sync:            a.Sync,
		Health:          string(a.Health.Status),
		HealthMessage:   a.Health.Message,
		Phase:           a.Phase,
		Replicas:        a.Replicas,
		ReadyReplicas:   a.Ready,
		Endpoints:       nonNil(a.Endpoints),
		CreatedAt:       Timestamp(a.Created),
		ResourceVersion: strconv.FormatUint(a.ResourceVersion, 10),
	}
}

// NativeTree returns the row and its tree in the native form. The workload
// named after the app carries the app's sync verdict; every other node
// exists as rendered and is Synced.
func (a *App) NativeTree() NativeTree {
	t := NativeTree{Application: a.Native(), Nodes: make([]NativeNode, 0, len(a.Tree))}
	for i, n := range a.Tree {
		o := n.Obj
		ki := o.Kind.Info()
		nn := NativeNode{
			Ref: o.Ref(), Group: ki.Group, Version: ki.Version, Kind: ki.Name,
			Namespace: o.Namespace, Name: o.Name, UID: o.UID, Parents: []string{},
			Images: n.Images(), Tag: n.Tag(), CreatedAt: Timestamp(o.Created), ResourceVersion: o.ResourceVersion,
			Sync: SyncSynced,
		}
		if p := a.Parent(i); p != nil {
			nn.Parents = append(nn.Parents, p.Obj.Ref())
		}
		if n.HasHealth {
			nn.Health, nn.HealthMessage = string(n.Health.Status), n.Health.Message
		}
		if (o.Kind == KindDeployment || o.Kind == KindStatefulSet) && o.Name == a.Name || o.Kind == KindApp {
			nn.Sync = a.Sync
		}
		t.Nodes = append(t.Nodes, nn)
	}
	return t
}

// Node returns the tree node with the given ref token.
func (a *App) Node(ref string) (*NodeInfo, bool) {
	for _, n := range a.Tree {
		if n.Obj.Ref() == ref {
			return n, true
		}
	}
	return nil, false
}

// ManagedNodes are the objects the app declares: its root and the depth-1
// children (what status.resources lists), not the ReplicaSets and Pods the
// controllers make from them. Shared read-only.
func (a *App) ManagedNodes() []*NodeInfo {
	if len(a.Tree) == 0 {
		return nil
	}
	return append([]*NodeInfo{a.Tree[0]}, a.resourceNodes()...)
}
