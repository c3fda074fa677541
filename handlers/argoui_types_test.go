package handlers

// Go mirrors of the types Argo CD's UI declares (argoproj/argo-cd,
// ui/src/app/shared/models.ts, and argo-ui's ObjectMeta/ListMeta), with
// the same field names and JSON types. The wire tests decode deployd's
// answers into them with unknown fields disallowed, so a field deployd
// emits under a name or type the dashboard does not know fails a test.
// Fields deployd adds beyond the UI's declarations are marked as such.

type uiListMeta struct {
	Continue        string `json:"continue,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	SelfLink        string `json:"selfLink,omitempty"`
}

type uiObjectMeta struct {
	Name              string            `json:"name"`
	GenerateName      string            `json:"generateName,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	SelfLink          string            `json:"selfLink,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	DeletionTimestamp string            `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Finalizers        []string          `json:"finalizers,omitempty"`
	ClusterName       string            `json:"clusterName,omitempty"`
}

type uiApplicationList struct {
	APIVersion string          `json:"apiVersion,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	Metadata   uiListMeta      `json:"metadata"`
	Items      []uiApplication `json:"items"`
}

type uiApplication struct {
	APIVersion         string              `json:"apiVersion,omitempty"`
	Kind               string              `json:"kind,omitempty"`
	Metadata           uiObjectMeta        `json:"metadata"`
	Spec               uiApplicationSpec   `json:"spec"`
	Status             uiApplicationStatus `json:"status"`
	Operation          *uiOperation        `json:"operation,omitempty"`
	IsAppOfAppsPattern bool                `json:"isAppOfAppsPattern,omitempty"`
}

type uiApplicationSpec struct {
	Project              string                `json:"project"`
	Source               uiApplicationSource   `json:"source"`
	Sources              []uiApplicationSource `json:"sources,omitempty"`
	Destination          uiDestination         `json:"destination"`
	RevisionHistoryLimit int                   `json:"revisionHistoryLimit,omitempty"`
}

type uiApplicationSource struct {
	TargetRevision string `json:"targetRevision"`
	RepoURL        string `json:"repoURL"`
	Path           string `json:"path,omitempty"`
	Chart          string `json:"chart,omitempty"`
	Ref            string `json:"ref,omitempty"`
	Name           string `json:"name,omitempty"`
}

type uiDestination struct {
	Server    string `json:"server"`
	Namespace string `json:"namespace"`
	Name      string `json:"name,omitempty"`
}

type uiApplicationStatus struct {
	ObservedAt     string                `json:"observedAt,omitempty"`
	Resources      []uiResourceStatus    `json:"resources"`
	Sync           uiSyncStatus          `json:"sync"`
	Conditions     []uiCondition         `json:"conditions,omitempty"`
	History        []uiRevisionHistory   `json:"history"`
	Health         uiHealthStatus        `json:"health"`
	OperationState *uiOperationState     `json:"operationState,omitempty"`
	Summary        *uiApplicationSummary `json:"summary,omitempty"`
}

type uiCondition struct {
	Type               string `json:"type"`
	Message            string `json:"message"`
	LastTransitionTime string `json:"lastTransitionTime"`
}

type uiResourceStatus struct {
	Group           string          `json:"group,omitempty"`
	Version         string          `json:"version"`
	Kind            string          `json:"kind"`
	Namespace       string          `json:"namespace"`
	Name            string          `json:"name"`
	Status          string          `json:"status"`
	Health          *uiHealthStatus `json:"health,omitempty"`
	CreatedAt       string          `json:"createdAt,omitempty"`
	Hook            bool            `json:"hook,omitempty"`
	RequiresPruning bool            `json:"requiresPruning,omitempty"`
	SyncWave        int             `json:"syncWave,omitempty"`
	Orphaned        bool            `json:"orphaned,omitempty"`
}

type uiSyncStatus struct {
	ComparedTo *uiApplicationSource `json:"comparedTo,omitempty"`
	Status     string               `json:"status"`
	Revision   string               `json:"revision,omitempty"`
	Revisions  []string             `json:"revisions,omitempty"`
}

type uiRevisionHistory struct {
	ID              int64                 `json:"id"`
	Revision        string                `json:"revision"`
	Source          uiApplicationSource   `json:"source"`
	Revisions       []string              `json:"revisions,omitempty"`
	Sources         []uiApplicationSource `json:"sources,omitempty"`
	DeployStartedAt string                `json:"deployStartedAt,omitempty"`
	DeployedAt      string                `json:"deployedAt,omitempty"`
	InitiatedBy     *uiOperationInitiator `json:"initiatedBy,omitempty"`
}

type uiHealthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

type uiOperationState struct {
	Operation  uiOperation            `json:"operation"`
	Phase      string                 `json:"phase"`
	Message    string                 `json:"message,omitempty"`
	StartedAt  string                 `json:"startedAt,omitempty"`
	FinishedAt string                 `json:"finishedAt,omitempty"`
	SyncResult *uiSyncOperationResult `json:"syncResult,omitempty"`
}

// uiSyncOperationResult is models.ts SyncOperationResult (resources and
// sources left out: deployd sends neither).
type uiSyncOperationResult struct {
	Revision  string               `json:"revision"`
	Revisions []string             `json:"revisions,omitempty"`
	Source    *uiApplicationSource `json:"source,omitempty"`
}

type uiOperation struct {
	Sync        uiSyncOperation      `json:"sync"`
	InitiatedBy uiOperationInitiator `json:"initiatedBy"`
}

type uiSyncOperation struct {
	Revision string `json:"revision"`
	Prune    bool   `json:"prune,omitempty"`
	DryRun   bool   `json:"dryRun,omitempty"`
}

type uiOperationInitiator struct {
	Username  string `json:"username,omitempty"`
	Automated bool   `json:"automated"`
}

type uiApplicationSummary struct {
	ExternalURLs []string `json:"externalURLs,omitempty"`
	Images       []string `json:"images,omitempty"`
}

type uiApplicationTree struct {
	Nodes         []uiResourceNode `json:"nodes"`
	OrphanedNodes []uiResourceNode `json:"orphanedNodes"`
	Hosts         []any            `json:"hosts"`
}

type uiResourceRef struct {
	UID       string `json:"uid,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	Group     string `json:"group,omitempty"`
}

type uiResourceNode struct {
	uiResourceRef
	ParentRefs      []uiResourceRef `json:"parentRefs,omitempty"`
	Info            []uiInfoItem    `json:"info,omitempty"`
	Images          []string        `json:"images,omitempty"`
	ResourceVersion string          `json:"resourceVersion"`
	CreatedAt       string          `json:"createdAt,omitempty"`
	// health is on Argo CD's ResourceNode API type (the UI reads it; its
	// Pod model declares it).
	Health         *uiHealthStatus           `json:"health,omitempty"`
	NetworkingInfo *uiResourceNetworkingInfo `json:"networkingInfo,omitempty"`
}

// models.ts ResourceNetworkingInfo.
type uiResourceNetworkingInfo struct {
	TargetLabels map[string]string `json:"targetLabels,omitempty"`
	TargetRefs   []uiResourceRef   `json:"targetRefs,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Ingress      []struct {
		Hostname string `json:"hostname,omitempty"`
		IP       string `json:"ip,omitempty"`
	} `json:"ingress,omitempty"`
	ExternalURLs []string `json:"externalURLs,omitempty"`
}

type uiInfoItem struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type uiClusterList struct {
	APIVersion string      `json:"apiVersion,omitempty"`
	Kind       string      `json:"kind,omitempty"`
	Metadata   uiListMeta  `json:"metadata"`
	Items      []uiCluster `json:"items"`
}

type uiCluster struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	Info   *struct {
		ApplicationsCount int    `json:"applicationsCount"`
		ServerVersion     string `json:"serverVersion,omitempty"`
		ConnectionState   struct {
			Status      string `json:"status"`
			Message     string `json:"message"`
			AttemptedAt string `json:"attemptedAt,omitempty"`
		} `json:"connectionState"`
		CacheInfo struct {
			ResourcesCount    int    `json:"resourcesCount,omitempty"`
			APIsCount         int    `json:"apisCount"`
			LastCacheSyncTime string `json:"lastCacheSyncTime,omitempty"`
		} `json:"cacheInfo"`
	} `json:"info,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type uiProjectList struct {
	APIVersion string      `json:"apiVersion,omitempty"`
	Kind       string      `json:"kind,omitempty"`
	Metadata   uiListMeta  `json:"metadata"`
	Items      []uiProject `json:"items"`
}

type uiProject struct {
	APIVersion string       `json:"apiVersion,omitempty"`
	Kind       string       `json:"kind,omitempty"`
	Metadata   uiObjectMeta `json:"metadata"`
	Spec       struct {
		SourceRepos      []string        `json:"sourceRepos"`
		SourceNamespaces []string        `json:"sourceNamespaces,omitempty"`
		Destinations     []uiDestination `json:"destinations"`
		Description      string          `json:"description,omitempty"`
	} `json:"spec"`
	Status struct {
		JWTTokensByRole map[string]any `json:"jwtTokensByRole,omitempty"`
	} `json:"status"`
}

type uiAuthSettings struct {
	URL                string `json:"url"`
	AppLabelKey        string `json:"appLabelKey"`
	StatusBadgeEnabled bool   `json:"statusBadgeEnabled"`
	StatusBadgeRootURL string `json:"statusBadgeRootUrl"`
	GoogleAnalytics    struct {
		TrackingID     string `json:"trackingID"`
		AnonymizeUsers bool   `json:"anonymizeUsers"`
	} `json:"googleAnalytics"`
	DexConfig struct {
		Connectors []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"connectors"`
	} `json:"dexConfig"`
	OIDCConfig struct {
		Name string `json:"name"`
		// issuer, clientID, cliClientID and scopes are on Argo CD's
		// OIDCConfig API type (server/settings/settings.proto).
		Issuer      string   `json:"issuer,omitempty"`
		ClientID    string   `json:"clientID,omitempty"`
		CLIClientID string   `json:"cliClientID,omitempty"`
		Scopes      []string `json:"scopes,omitempty"`
		// deployd's addition: the loopback redirect of deployd login.
		CLIRedirectURI string `json:"cliRedirectURI,omitempty"`
	} `json:"oidcConfig"`
	Help struct {
		ChatURL    string            `json:"chatUrl"`
		ChatText   string            `json:"chatText"`
		BinaryURLs map[string]string `json:"binaryUrls"`
	} `json:"help"`
	UserLoginsDisabled        bool     `json:"userLoginsDisabled"`
	KustomizeVersions         []string `json:"kustomizeVersions"`
	UICSSURL                  string   `json:"uiCssURL"`
	UIBannerContent           string   `json:"uiBannerContent"`
	UIBannerURL               string   `json:"uiBannerURL"`
	UIBannerPermanent         bool     `json:"uiBannerPermanent"`
	UIBannerPosition          string   `json:"uiBannerPosition"`
	ExecEnabled               bool     `json:"execEnabled"`
	AppsInAnyNamespaceEnabled bool     `json:"appsInAnyNamespaceEnabled"`
	HydratorEnabled           bool     `json:"hydratorEnabled"`
	SyncWithReplaceAllowed    bool     `json:"syncWithReplaceAllowed"`
}

type uiVersionMessage struct {
	Version          string `json:"Version"`
	BuildDate        string `json:"BuildDate"`
	GoVersion        string `json:"GoVersion"`
	Compiler         string `json:"Compiler"`
	Platform         string `json:"Platform"`
	KustomizeVersion string `json:"KustomizeVersion,omitempty"`
	HelmVersion      string `json:"HelmVersion,omitempty"`
	KubectlVersion   string `json:"KubectlVersion,omitempty"`
	JsonnetVersion   string `json:"JsonnetVersion,omitempty"`
	// GitCommit is on Argo CD's VersionMessage API type.
	GitCommit string `json:"GitCommit"`
}

type uiUserInfo struct {
	LoggedIn bool     `json:"loggedIn"`
	Username string   `json:"username"`
	Iss      string   `json:"iss"`
	Groups   []string `json:"groups"`
	// deployd's additions: the tenant and the roles derived from the token.
	Org        string `json:"org,omitempty"`
	SuperAdmin bool   `json:"superAdmin"`
	OrgAdmin   bool   `json:"orgAdmin"`
}

type uiCanI struct {
	Value string `json:"value"`
}

type uiSyncWindowState struct {
	ActiveWindows   []any `json:"activeWindows"`
	AssignedWindows []any `json:"assignedWindows"`
	CanSync         bool  `json:"canSync"`
}

type uiRevisionMetadata struct {
	Author        string   `json:"author,omitempty"`
	Date          string   `json:"date"`
	Tags          []string `json:"tags,omitempty"`
	Message       string   `json:"message,omitempty"`
	SignatureInfo string   `json:"signatureInfo,omitempty"`
}
