package projection

import (
	"bufio"
	"encoding/json"
	"io"
	"iter"
	"net"
	"strconv"
	"sync"
	"time"
)

// The Argo CD wire types deployd emits, with the field names and types of
// Argo CD's own UI models. Only what deployd fills is declared.

// Application is an Argo CD Application.
type Application struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   ObjectMeta        `json:"metadata"`
	Spec       ApplicationSpec   `json:"spec"`
	Status     ApplicationStatus `json:"status"`
}

// ObjectMeta is the metadata of an Application.
type ObjectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	UID               string            `json:"uid,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
}

// ApplicationSpec is spec of an Application.
type ApplicationSpec struct {
	Source      ApplicationSource      `json:"source"`
	Destination ApplicationDestination `json:"destination"`
	Project     string                 `json:"project"`
}

// ApplicationSource is spec.source.
type ApplicationSource struct {
	RepoURL        string `json:"repoURL"`
	Path           string `json:"path,omitempty"`
	TargetRevision string `json:"targetRevision"`
}

// ApplicationDestination is spec.destination.
type ApplicationDestination struct {
	Server    string `json:"server"`
	Namespace string `json:"namespace"`
	// Name is the cluster's name; set only when the projection holds
	// several clusters.
	Name string `json:"name,omitempty"`
}

// ApplicationStatus is status of an Application.
type ApplicationStatus struct {
	Sync           SyncStatus         `json:"sync"`
	Health         Health             `json:"health"`
	Summary        ApplicationSummary `json:"summary"`
	History        []RevisionHistory  `json:"history"`
	Resources      []ResourceStatus   `json:"resources"`
	OperationState *OperationState    `json:"operationState,omitempty"`
	// Conditions are set only when the App's cluster does not answer.
	Conditions []ApplicationCondition `json:"conditions,omitempty"`
}

// ApplicationCondition is an entry of status.conditions.
type ApplicationCondition struct {
	Type               string `json:"type"`
	Message            string `json:"message"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// SyncStatus is status.sync.
type SyncStatus struct {
	Status   SyncCode `json:"status"`
	Revision string   `json:"revision,omitempty"`
}

// ApplicationSummary is status.summary.
type ApplicationSummary struct {
	Images       []string `json:"images"`
	ExternalURLs []string `json:"externalURLs,omitempty"`
}

// RevisionHistory is one status.history entry. Argo CD always sends
// initiatedBy, and its UI reads it on every entry.
type RevisionHistory struct {
	ID              int64              `json:"id"`
	Revision        string             `json:"revision"`
	DeployedAt      string             `json:"deployedAt,omitempty"`
	DeployStartedAt string             `json:"deployStartedAt,omitempty"`
	Source          ApplicationSource  `json:"source"`
	InitiatedBy     OperationInitiator `json:"initiatedBy"`
}

// historyInitiator is who started the i-th release: the user whose sync
// asked for it, when the sync in hand is that release's, else the
// controllers (automated).
func (a *App) historyInitiator(i int) OperationInitiator {
	if op := a.Operation; op != nil && i == len(a.History)-1 && op.InitiatedBy != "" && op.Revision == a.History[i].Revision {
		return OperationInitiator{Username: op.InitiatedBy}
	}
	return OperationInitiator{Automated: true}
}

// ResourceStatus is one status.resources entry.
type ResourceStatus struct {
	Group     string   `json:"group,omitempty"`
	Version   string   `json:"version"`
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Status    SyncCode `json:"status"`
	Health    *Health  `json:"health,omitempty"`
	CreatedAt string   `json:"createdAt,omitempty"`
}

// OperationState is status.operationState.
type OperationState struct {
	Operation  Operation            `json:"operation"`
	Phase      string               `json:"phase"`
	Message    string               `json:"message,omitempty"`
	StartedAt  string               `json:"startedAt,omitempty"`
	FinishedAt string               `json:"finishedAt,omitempty"`
	SyncResult *SyncOperationResult `json:"syncResult,omitempty"`
}

// SyncOperationResult is operationState.syncResult.
type SyncOperationResult struct {
	Revision string `json:"revision"`
}

// Operation is operationState.operation.
type Operation struct {
	Sync        SyncOperation      `json:"sync"`
	InitiatedBy OperationInitiator `json:"initiatedBy"`
}

// SyncOperation is operation.sync.
type SyncOperation struct {
	Revision string `json:"revision"`
}

// OperationInitiator is operation.initiatedBy.
type OperationInitiator struct {
	Username  string `json:"username,omitempty"`
	Automated bool   `json:"automated"`
}

// ApplicationTree is an Argo CD ApplicationTree.
type ApplicationTree struct {
	Nodes         []ResourceNode `json:"nodes"`
	OrphanedNodes []ResourceNode `json:"orphanedNodes"`
	Hosts         []struct{}     `json:"hosts"`
}

// ResourceRef identifies a resource.
type ResourceRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// ResourceNode is one node of an ApplicationTree.
type ResourceNode struct {
	ResourceRef
	ParentRefs      []ResourceRef `json:"parentRefs,omitempty"`
	Info            []InfoItem    `json:"info,omitempty"`
	Images          []string      `json:"images,omitempty"`
	Health          *Health       `json:"health,omitempty"`
	CreatedAt       string        `json:"createdAt,omitempty"`
	ResourceVersion string        `json:"resourceVersion,omitempty"`
	// NetworkingInfo is how traffic reaches the node (Services, Ingresses)
	// and what it matches (Pods): the stock UI's network view draws it.
	NetworkingInfo *NetworkingInfo `json:"networkingInfo,omitempty"`
}

// NetworkingInfo is Argo CD's ResourceNetworkingInfo.
type NetworkingInfo struct {
	TargetLabels map[string]string     `json:"targetLabels,omitempty"` // a Service's selector
	TargetRefs   []ResourceRef         `json:"targetRefs,omitempty"`   // an Ingress's backend Services
	Labels       map[string]string     `json:"labels,omitempty"`       // a Pod's labels
	Ingress      []LoadBalancerIngress `json:"ingress,omitempty"`
	ExternalURLs []string              `json:"externalURLs,omitempty"`
}

// LoadBalancerIngress is one status.loadBalancer.ingress entry.
type LoadBalancerIngress struct {
	IP       string `json:"ip,omitempty"`
	Hostname string `json:"hostname,omitempty"`
}

// InfoItem is one name/value of a node's info.
type InfoItem struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Timestamp formats Unix seconds as RFC 3339 UTC; "" for 0.
func Timestamp(unix int64) string {
	if unix == 0 {
		return ""
	}
	return time.Unix(unix, 0).UTC().Format(time.RFC3339)
}

// Application returns the row as an Argo CD Application.
func (a *App) Application() Application {
	cfg := a.cfg
	labels := map[string]string{LabelInstance: a.Name}
	if a.Env != "" {
		labels[LabelEnv] = a.Env
	}
	if a.Org != "" {
		labels[LabelOrg] = a.Org
	}
	app := Application{
		APIVersion: "argoproj.io/v1alpha1",
		Kind:       "Application",
		Metadata: ObjectMeta{
			Name:              a.Name,
			Namespace:         a.Namespace,
			UID:               a.UID,
			CreationTimestamp: Timestamp(a.Created),
			Labels:            labels,
		},
		Spec: ApplicationSpec{
			Source:      a.source(cfg),
			Destination: a.Destination(),
			Project:     a.Project,
		},
		Status: ApplicationStatus{
			Sync:    SyncStatus{Status: a.Sync, Revision: a.Declared},
			Health:  a.Health,
			Summary: ApplicationSummary{Images: nonNil(a.Images), ExternalURLs: a.Endpoints},
		},
	}
	app.Status.Conditions = a.conditions()
	if a.ResourceVersion != 0 {
		app.Metadata.ResourceVersion = strconv.FormatUint(a.ResourceVersion, 10)
	}
	app.Status.History = make([]RevisionHistory, 0, len(a.History))
	for i, h := range a.History {
		app.Status.History = append(app.Status.History, RevisionHistory{
			ID: h.ID, Revision: h.Revision,
			DeployedAt: Timestamp(h.DeployedAt), DeployStartedAt: Timestamp(h.DeployStartedAt),
			Source: app.Spec.Source, InitiatedBy: a.historyInitiator(i),
		})
	}
	res := a.resourceNodes()
	app.Status.Resources = make([]ResourceStatus, 0, len(res))
	for _, n := range res {
		app.Status.Resources = append(app.Status.Resources, a.resourceStatus(n))
	}
	if m := a.Engine; m != nil {
		app.Status.Sync.Revision = m.Revision
	}
	if op := a.Operation; op != nil && (a.Engine == nil || syncOperationWins(op, a.Engine)) {
		app.Status.OperationState = &OperationState{
			Operation: Operation{Sync: SyncOperation{Revision: op.Revision}, InitiatedBy: OperationInitiator{Username: op.InitiatedBy}},
			Phase:     op.Phase,
			Message:   op.Message,
			StartedAt: op.StartedAt,
		}
	} else if a.Engine != nil {
		app.Status.OperationState = engineOperation(a.Engine)
	} else if n := len(a.History); n > 0 {
		// Without a sync asked for, the last operation is the newest
		// rollout the cluster shows: the controllers ran it, and it is
		// over (Argo CD's UI offers history and rollback once there is an
		// operation).
		h := a.History[n-1]
		app.Status.OperationState = &OperationState{
			Operation:  Operation{Sync: SyncOperation{Revision: h.Revision}, InitiatedBy: OperationInitiator{Automated: true}},
			Phase:      "Succeeded",
			Message:    "rolled out " + h.Revision,
			StartedAt:  Timestamp(h.DeployStartedAt),
			FinishedAt: Timestamp(h.DeployedAt),
			SyncResult: &SyncOperationResult{Revision: h.Revision},
		}
	}
	return app
}

// Destination is the row's spec.destination, as Application() has it.
//
// With several clusters it names the row's cluster (server and name), and
// its namespace is the cluster's own, without the qualifying suffix.
func (a *App) Destination() ApplicationDestination {
	if a.cfg != nil && len(a.cfg.Clusters) > 0 {
		name, server := a.cfg.Cluster(a.ClusterIndex())
		ns, _ := SplitNamespace(a.Namespace)
		if a.Source != nil && a.Source.DestNamespace != "" {
			ns = a.Source.DestNamespace
		}
		return ApplicationDestination{Server: server, Namespace: ns, Name: name}
	}
	if a.Source != nil {
		d := ApplicationDestination{Server: a.Source.DestServer, Namespace: a.Source.DestNamespace}
		if d.Server == "" {
			d.Server = a.cfg.ClusterServer
		}
		return d
	}
	return ApplicationDestination{Server: a.cfg.ClusterServer, Namespace: a.Namespace}
}

// RepoURL is the row's spec.source.repoURL, as Application() has it.
func (a *App) RepoURL() string { return a.source(a.cfg).RepoURL }

func (a *App) source(cfg *Config) ApplicationSource {
	if a.Source != nil {
		return ApplicationSource{RepoURL: a.Source.RepoURL, Path: a.Source.Path, TargetRevision: a.Source.TargetRevision}
	}
	if src, ok := cfg.managedSource(a); ok {
		return src
	}
	d := cfg.Source
	return ApplicationSource{
		RepoURL:        d.expand(d.RepoURL, a.Namespace, a.Name),
		Path:           d.expand(d.Path, a.Namespace, a.Name),
		TargetRevision: d.expand(d.TargetRevision, a.Namespace, a.Name),
	}
}

// resourceStatus is a depth-1 node as a status.resources entry. The
// workload carries the app's sync verdict; the other rendered children
// exist as the operator rendered them and are Synced.
func (a *App) resourceStatus(n *NodeInfo) ResourceStatus {
	o := n.Obj
	ki := o.Kind.Info()
	rs := ResourceStatus{Group: ki.Group, Version: ki.Version, Kind: ki.Name, Namespace: o.Namespace, Name: o.Name, Status: SyncSynced, CreatedAt: Timestamp(o.Created)}
	if (o.Kind == KindDeployment || o.Kind == KindStatefulSet) && o.Name == a.Name {
		rs.Status = a.Sync
	}
	if n.HasHealth {
		h := n.Health
		rs.Health = &h
	}
	return rs
}

// ApplicationJSON is the row's Application encoded as JSON, computed once
// per row version and shared by every reader.
func (a *App) ApplicationJSON() []byte {
	return a.argo.get(func() []byte { return mustJSON(a.Application()) })
}

// ApplicationTree returns the row's ApplicationTree.
func (a *App) ApplicationTree() ApplicationTree {
	t := ApplicationTree{Nodes: make([]ResourceNode, 0, len(a.Tree)), OrphanedNodes: []ResourceNode{}, Hosts: []struct{}{}}
	for i, n := range a.Tree {
		t.Nodes = append(t.Nodes, resourceNode(n, a.Parent(i)))
	}
	return t
}

// ApplicationTreeJSON is the row's ApplicationTree encoded as JSON, computed
// once per tree version and shared by every reader.
func (a *App) ApplicationTreeJSON() []byte {
	return a.tree.get(func() []byte { return mustJSON(a.ApplicationTree()) })
}

func resourceNode(n, parent *NodeInfo) ResourceNode {
	o := n.Obj
	rn := ResourceNode{
		ResourceRef:     refOf(o),
		Images:          n.Images(),
		CreatedAt:       Timestamp(o.Created),
		ResourceVersion: o.ResourceVersion,
	}
	if parent != nil {
		rn.ParentRefs = []ResourceRef{refOf(parent.Obj)}
	}
	if tag := n.Tag(); tag != "" {
		rn.Info = []InfoItem{{Name: "Image Tag", Value: tag}}
	}
	if n.HasHealth {
		h := n.Health
		rn.Health = &h
	}
	rn.NetworkingInfo = networkingInfo(o)
	return rn
}

// networkingInfo is what Argo CD tells of a Pod, a Service or an Ingress
// for its network view; nil for every other kind.
func networkingInfo(o *Object) *NetworkingInfo {
	switch sp := o.Spec.(type) {
	case *PodSpec:
		return &NetworkingInfo{Labels: o.Labels.Map()}
	case *ServiceSpec:
		return &NetworkingInfo{TargetLabels: sp.Selector.Map(), Ingress: lbIngress(sp.LoadBalancer)}
	case *IngressSpec:
		ni := &NetworkingInfo{Ingress: lbIngress(sp.LoadBalancer)}
		svc := KindService.Info()
		for _, name := range sp.Services {
			ni.TargetRefs = append(ni.TargetRefs, ResourceRef{Version: svc.Version, Kind: svc.Name, Namespace: o.Namespace, Name: name})
		}
		scheme := "http://"
		if sp.TLS {
			scheme = "https://"
		}
		for _, h := range sp.Hosts {
			ni.ExternalURLs = append(ni.ExternalURLs, scheme+h)
		}
		return ni
	}
	return nil
}

func lbIngress(addrs []string) []LoadBalancerIngress {
	var out []LoadBalancerIngress
	for _, a := range addrs {
		if net.ParseIP(a) != nil {
			out = append(out, LoadBalancerIngress{IP: a})
		} else {
			out = append(out, LoadBalancerIngress{Hostname: a})
		}
	}
	return out
}

func refOf(o *Object) ResourceRef {
	ki := o.Kind.Info()
	return ResourceRef{Group: ki.Group, Version: ki.Version, Kind: ki.Name, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs of strings, numbers and slices are encoded:
		// failure is a programming error.
		panic("projection: encode: " + err.Error())
	}
	return b
}

// AppendApplicationList appends an Argo CD ApplicationList of the given rows
// at position pos, assembled from each row's pre-encoded Application: no
// row is encoded again. Items is [] when there are none. With a nil dst the
// buffer is sized exactly first (rows is iterated twice).
func AppendApplicationList(dst []byte, pos Position, rows iter.Seq[*App]) []byte {
	if dst == nil {
		n := 128
		for a := range rows {
			n += len(a.ApplicationJSON()) + 1
		}
		dst = make([]byte, 0, n)
	}
	dst = AppendApplicationListHead(dst, pos)
	first := true
	for a := range rows {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, a.ApplicationJSON()...)
	}
	return append(dst, ApplicationListTail...)
}

// AppendApplicationListHead appends what an ApplicationList at position pos
// says before its first item; the items follow, separated by commas, then
// ApplicationListTail.
func AppendApplicationListHead(dst []byte, pos Position) []byte {
	dst = append(dst, `{"apiVersion":"argoproj.io/v1alpha1","kind":"ApplicationList","metadata":{"resourceVersion":"`...)
	dst = pos.Append(dst)
	return append(dst, `"},"items":[`...)
}

// ApplicationListTail closes an ApplicationList.
const ApplicationListTail = "]}"

// ApplicationListSize is the length of what AppendApplicationList appends,
// counted from the rows' pre-encoded lengths, so a list can be sent with
// its Content-Length (in whole writes, not chunks) and still never be
// assembled in memory.
func ApplicationListSize(pos Position, rows iter.Seq[*App]) int {
	var head [160]byte
	n, items := len(AppendApplicationListHead(head[:0], pos))+len(ApplicationListTail), 0
	for a := range rows {
		n += len(a.ApplicationJSON())
		items++
	}
	if items > 1 {
		n += items - 1 // the commas
	}
	return n
}

// ListBufferSize is the buffer a list is written through: a tenant's list
// goes out in one write, a large one in few. A loopback socket takes a
// 400 KB answer in 64 KiB writes about 17 % slower than in one write, in
// 256 KiB writes about 4 % slower.
const ListBufferSize = 256 << 10

// listWriters are WriteApplicationList's buffers, reused, so a request
// allocates none (at a thousand small lists a second, a fresh buffer each
// was most of what the collector had to do).
var listWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, ListBufferSize) }}

// WriteApplicationList writes what AppendApplicationList appends, row by row
// to w, without assembling the list in memory.
func WriteApplicationList(w io.Writer, pos Position, rows iter.Seq[*App]) error {
	bw := listWriters.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() { bw.Reset(nil); listWriters.Put(bw) }()
	bw.Write(AppendApplicationListHead(bw.AvailableBuffer(), pos))
	first := true
	for a := range rows {
		if !first {
			bw.WriteByte(',')
		}
		first = false
		bw.Write(a.ApplicationJSON())
	}
	bw.WriteString(ApplicationListTail)
	return bw.Flush()
}
