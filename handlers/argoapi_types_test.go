package handlers

// Go mirrors of the Argo CD API types of the routes its UI calls beyond the
// application list and tree (argoproj/argo-cd: pkg/apis/application/v1alpha1
// types.go, server/application/application.proto, reposerver's
// ManifestResponse). The Events route answers Kubernetes' own EventList
// (k8s.io/api/core/v1), decoded as such.

type uiManagedResourcesResponse struct {
	Items []uiResourceDiff `json:"items"`
}

type uiResourceDiff struct {
	Group               string `json:"group,omitempty"`
	Kind                string `json:"kind,omitempty"`
	Namespace           string `json:"namespace,omitempty"`
	Name                string `json:"name,omitempty"`
	TargetState         string `json:"targetState,omitempty"`
	LiveState           string `json:"liveState,omitempty"`
	Diff                string `json:"diff,omitempty"`
	Hook                bool   `json:"hook,omitempty"`
	NormalizedLiveState string `json:"normalizedLiveState,omitempty"`
	PredictedLiveState  string `json:"predictedLiveState,omitempty"`
	ResourceVersion     string `json:"resourceVersion,omitempty"`
	Modified            bool   `json:"modified,omitempty"`
}

type uiApplicationResourceResponse struct {
	Manifest string `json:"manifest"`
}

type uiResourceActionsListResponse struct {
	Actions []uiResourceAction `json:"actions"`
}

type uiResourceAction struct {
	Name   string `json:"name,omitempty"`
	Params []struct {
		Name    string `json:"name,omitempty"`
		Value   string `json:"value,omitempty"`
		Type    string `json:"type,omitempty"`
		Default string `json:"default,omitempty"`
	} `json:"params,omitempty"`
	Disabled    bool   `json:"disabled,omitempty"`
	IconClass   string `json:"iconClass,omitempty"`
	DisplayName string `json:"displayName,omitempty"`
}

type uiLinksResponse struct {
	Items []struct {
		Title       string `json:"title"`
		URL         string `json:"url"`
		Description string `json:"description,omitempty"`
		IconClass   string `json:"iconClass,omitempty"`
	} `json:"items"`
}

type uiManifestResponse struct {
	Manifests    []string `json:"manifests"`
	Namespace    string   `json:"namespace"`
	Server       string   `json:"server"`
	Revision     string   `json:"revision"`
	SourceType   string   `json:"sourceType"`
	VerifyResult string   `json:"verifyResult,omitempty"`
	Commands     []string `json:"commands,omitempty"`
}

type uiLogEntry struct {
	Content      string `json:"content"`
	TimeStamp    string `json:"timeStamp,omitempty"`
	Last         bool   `json:"last,omitempty"`
	TimeStampStr string `json:"timeStampStr,omitempty"`
	PodName      string `json:"podName"`
}

type uiLogResult struct {
	Result uiLogEntry `json:"result"`
}

type uiApplicationResponse struct{}
