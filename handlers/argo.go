package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// authSettings is Argo CD's AuthSettings, as the dashboard reads it.
type authSettings struct {
	URL                       string          `json:"url"`
	AppLabelKey               string          `json:"appLabelKey"`
	StatusBadgeEnabled        bool            `json:"statusBadgeEnabled"`
	StatusBadgeRootURL        string          `json:"statusBadgeRootUrl"`
	GoogleAnalytics           googleAnalytics `json:"googleAnalytics"`
	DexConfig                 dexConfig       `json:"dexConfig"`
	OIDCConfig                oidcConfig      `json:"oidcConfig"`
	Help                      help            `json:"help"`
	UserLoginsDisabled        bool            `json:"userLoginsDisabled"`
	KustomizeVersions         []string        `json:"kustomizeVersions"`
	UICSSURL                  string          `json:"uiCssURL"`
	UIBannerContent           string          `json:"uiBannerContent"`
	UIBannerURL               string          `json:"uiBannerURL"`
	UIBannerPermanent         bool            `json:"uiBannerPermanent"`
	UIBannerPosition          string          `json:"uiBannerPosition"`
	ExecEnabled               bool            `json:"execEnabled"`
	AppsInAnyNamespaceEnabled bool            `json:"appsInAnyNamespaceEnabled"`
	HydratorEnabled           bool            `json:"hydratorEnabled"`
	SyncWithReplaceAllowed    bool            `json:"syncWithReplaceAllowed"`
}

type googleAnalytics struct {
	TrackingID     string `json:"trackingID"`
	AnonymizeUsers bool   `json:"anonymizeUsers"`
}

type dexConfig struct {
	Connectors []dexConnector `json:"connectors"`
}

type dexConnector struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// oidcConfig is Argo CD's OIDCConfig as its UI reads it: with it set, the
// login page offers "Log in via <name>", which leads to /auth/login. PKCE
// in the browser stays off: the code flow runs on the server.
//
// cliClientID is Argo CD's field for the client its CLI signs in with;
// cliRedirectURI is deployd's: the loopback redirect that client may use,
// on any port. With them, `deployd login --server URL` needs nothing else.
type oidcConfig struct {
	Name           string   `json:"name"`
	Issuer         string   `json:"issuer,omitempty"`
	ClientID       string   `json:"clientID,omitempty"`
	CLIClientID    string   `json:"cliClientID,omitempty"`
	CLIRedirectURI string   `json:"cliRedirectURI,omitempty"`
	Scopes         []string `json:"scopes,omitempty"`
}

type help struct {
	ChatURL    string            `json:"chatUrl"`
	ChatText   string            `json:"chatText"`
	BinaryURLs map[string]string `json:"binaryUrls"`
}

// settings answers Argo CD's AuthSettings: the public URL, no secrets.
// It is public, as Argo CD's is: the login page reads it (the identity
// provider's name and issuer) before anyone signs in.
func (s *Server) settings(c echo.Context) error {
	if err := checkParams(c.QueryParams()); err != nil {
		return err
	}
	ci := s.d.Auth.Client()
	oidc := oidcConfig{Name: "Hanzo", Issuer: ci.Issuer, ClientID: ci.ClientID, CLIClientID: ci.CLIClientID, Scopes: ci.Scopes}
	if ci.Issuer != "" {
		oidc.CLIRedirectURI = auth.CLIRedirectURI
	}
	return c.JSON(http.StatusOK, authSettings{
		URL:                       s.d.PublicURL,
		AppLabelKey:               projection.LabelInstance,
		GoogleAnalytics:           googleAnalytics{AnonymizeUsers: true},
		DexConfig:                 dexConfig{Connectors: []dexConnector{}},
		OIDCConfig:                oidc,
		Help:                      help{BinaryURLs: map[string]string{}},
		UserLoginsDisabled:        true,
		KustomizeVersions:         []string{},
		UIBannerPosition:          "top",
		AppsInAnyNamespaceEnabled: true,
	})
}

type versionMessage struct {
	Version   string `json:"Version"`
	BuildDate string `json:"BuildDate"`
	GitCommit string `json:"GitCommit"`
	GoVersion string `json:"GoVersion"`
	Compiler  string `json:"Compiler"`
	Platform  string `json:"Platform"`
}

// version answers Argo CD's VersionMessage; to a caller not signed in,
// only the version, as Argo CD does.
func (s *Server) version(c echo.Context) error {
	v := s.d.Version
	if auth.PrincipalFrom(c.Request().Context()) == nil {
		return c.JSON(http.StatusOK, versionMessage{Version: v.Version})
	}
	return c.JSON(http.StatusOK, versionMessage{
		Version: v.Version, BuildDate: v.BuildDate, GitCommit: v.GitCommit,
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	})
}

type canIAnswer struct {
	Value string `json:"value"`
}

// canI answers Argo CD's permission probe truthfully for this principal:
// reading what its scope shows, and (SuperAdmins only) the writes deployd
// performs. Everything else deployd does not do, for anyone.
func (s *Server) canI(c echo.Context) error {
	resource, action := c.Param("resource"), c.Param("action")
	sub := strings.Trim(c.Param("*"), "/")
	sc, scopeErr := scopeOf(c)
	yes := false
	switch resource {
	case "applications":
		switch action {
		case "get":
			yes = scopeErr == nil && s.canSee(sc, sub)
		case "sync", "update", "override", "action":
			yes = scopeErr == nil && sc.CanWrite()
		}
	case "logs":
		yes = action == "get" && scopeErr == nil && s.canSee(sc, sub)
	case "projects", "clusters":
		yes = action == "get" && scopeErr == nil
	}
	if yes {
		return c.JSON(http.StatusOK, canIAnswer{"yes"})
	}
	return c.JSON(http.StatusOK, canIAnswer{"no"})
}

// canSee reports whether an Argo CD object reference ("*", "project/*",
// "project/name" or "project/namespace/name") names something the scope
// may read.
func (s *Server) canSee(sc auth.Scope, ref string) bool {
	if sc.IsAll() {
		return true
	}
	parts := strings.Split(ref, "/")
	name, namespace := "*", "*"
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		name = parts[1]
	case 3:
		namespace, name = parts[1], parts[2]
	default:
		return false
	}
	if name == "" || name == "*" {
		return namespace == "*" || sc.Sees(namespace, sc.Org())
	}
	for a := range s.visibleRows(s.d.Snapshots.Snapshot(), sc) {
		if a.Name == name && (namespace == "*" || namespace == a.Namespace) {
			return true
		}
	}
	return false
}

type listMeta struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

type clusterList struct {
	Metadata listMeta  `json:"metadata"`
	Items    []cluster `json:"items"`
}

type cluster struct {
	Name   string      `json:"name"`
	Server string      `json:"server"`
	Info   clusterInfo `json:"info"`
}

type clusterInfo struct {
	ApplicationsCount int             `json:"applicationsCount"`
	ServerVersion     string          `json:"serverVersion,omitempty"`
	ConnectionState   connectionState `json:"connectionState"`
	CacheInfo         cacheInfo       `json:"cacheInfo"`
}

// connectionState is Argo CD's ConnectionState: Successful or Failed, why,
// and when the cluster was last asked.
type connectionState struct {
	Status      string     `json:"status"`
	Message     string     `json:"message"`
	AttemptedAt *time.Time `json:"attemptedAt,omitempty"`
}

type cacheInfo struct {
	APIsCount int `json:"apisCount"`
}

// clusters lists the one cluster deployd reads, with the count of
// applications the caller sees.
func (s *Server) clusters(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	if err := checkParams(q, "fields"); err != nil {
		return err
	}
	fields, err := listFields(q)
	if err != nil {
		return err
	}
	return jsonFields(c, s.clusterList(sc), fields)
}

// clusterList is the clusters deployd reads, their Apps counted within
// the scope.
func (s *Server) clusterList(sc auth.Scope) clusterList {
	snap := s.d.Snapshots.Snapshot()
	entries := []ClusterEntry{{Name: s.d.ClusterName, Server: s.d.Projection.ClusterServer, Status: s.d.Cluster()}}
	if s.d.Clusters != nil {
		entries = s.d.Clusters()
	}
	counts := make([]int, len(entries))
	for a := range s.visibleRows(snap, sc) {
		if i := a.ClusterIndex(); i < len(counts) {
			counts[i]++
		}
	}
	out := clusterList{Metadata: listMeta{ResourceVersion: snap.Position.String()}, Items: make([]cluster, 0, len(entries))}
	for i, e := range entries {
		st := e.Status
		state := connectionState{Status: "Successful"}
		switch {
		case !st.FailedSince.IsZero() && s.d.Clusters != nil:
			state = connectionState{Status: "Failed", Message: "the API server has not answered since " +
				st.FailedSince.UTC().Format(time.RFC3339) + "; its applications show their last known state"}
		case !st.Ready:
			state = connectionState{Status: "Failed", Message: st.Reason}
		}
		if !st.CheckedAt.IsZero() {
			at := st.CheckedAt.UTC().Truncate(time.Second)
			state.AttemptedAt = &at
		}
		out.Items = append(out.Items, cluster{Name: e.Name, Server: e.Server,
			Info: clusterInfo{ApplicationsCount: counts[i], ServerVersion: minorVersion(st.ServerVersion), ConnectionState: state,
				CacheInfo: cacheInfo{APIsCount: len(projection.Registry())}}})
	}
	return out
}

// minorVersion is a Kubernetes version as Argo CD shows a cluster's:
// "1.35" for "v1.35.0"; "" when it is not one.
func minorVersion(v string) string {
	major, rest, ok := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	if !ok || major == "" {
		return ""
	}
	minor, _, _ := strings.Cut(rest, ".")
	if minor == "" {
		return ""
	}
	return major + "." + minor
}

// getCluster answers Argo CD's GET clusters/{id.value}?id.type=url|name|
// name_escaped: a cluster deployd reads, by its server URL or name (the
// stock UI asks for an App's destination cluster by its server).
func (s *Server) getCluster(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	if err := checkParams(q, "id.type", "id.value"); err != nil {
		return err
	}
	idType, err := single(q, "id.type")
	if err != nil {
		return err
	}
	// The server URL comes percent-encoded in one segment, decoded once by
	// decodeParams.
	id := c.Param("server")
	if err := agrees(q, "id.value", id, "cluster"); err != nil {
		return err
	}
	byName := false
	switch idType {
	case "", "url":
	case "name", "name_escaped":
		byName = true
	default:
		return errorf(http.StatusBadRequest, "id.type must be url, name or name_escaped")
	}
	list := s.clusterList(sc)
	known := make([]string, 0, len(list.Items))
	for _, cl := range list.Items {
		if byName && id == cl.Name || !byName && id == cl.Server {
			return c.JSON(http.StatusOK, cl)
		}
		known = append(known, quoteShort(cl.Server)+" ("+cl.Name+")")
	}
	reads := "one cluster, "
	if len(known) > 1 {
		reads = "the clusters "
	}
	return errorf(http.StatusNotFound, "cluster "+quoteShort(id)+" not found: deployd reads "+reads+strings.Join(known, ", "))
}

type projectList struct {
	Metadata listMeta  `json:"metadata"`
	Items    []project `json:"items"`
}

type project struct {
	Metadata projectMeta `json:"metadata"`
	Spec     projectSpec `json:"spec"`
	Status   struct{}    `json:"status"`
}

type projectMeta struct {
	Name              string `json:"name"`
	Namespace         string `json:"namespace,omitempty"`
	UID               string `json:"uid,omitempty"`
	CreationTimestamp string `json:"creationTimestamp,omitempty"`
}

type projectSpec struct {
	Description  string        `json:"description,omitempty"`
	SourceRepos  []string      `json:"sourceRepos"`
	Destinations []destination `json:"destinations"`
}

type destination struct {
	Server    string `json:"server"`
	Namespace string `json:"namespace"`
}

// projects lists the projects the caller's applications use, "default"
// always among them; a SuperAdmin also sees every AppProject.
func (s *Server) projects(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	if err := checkParams(q, "fields"); err != nil {
		return err
	}
	fields, err := listFields(q)
	if err != nil {
		return err
	}
	snap := s.d.Snapshots.Snapshot()
	names := map[string]projectMeta{projection.DefaultProject: {Name: projection.DefaultProject}}
	for a := range s.visibleRows(snap, sc) {
		if _, ok := names[a.Project]; !ok {
			names[a.Project] = projectMeta{Name: a.Project}
		}
	}
	for _, p := range snap.Projects() {
		if _, used := names[p.Name]; used || sc.IsAll() {
			names[p.Name] = projectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, CreationTimestamp: projection.Timestamp(p.Created)}
		}
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := projectList{Metadata: listMeta{ResourceVersion: snap.Position.String()}, Items: []project{}}
	dest := destination{Server: s.d.Projection.ClusterServer, Namespace: "*"}
	if !sc.IsAll() {
		dest.Namespace = sc.Namespace()
	}
	for _, k := range keys {
		out.Items = append(out.Items, project{Metadata: names[k], Spec: projectSpec{SourceRepos: []string{"*"}, Destinations: []destination{dest}}})
	}
	return jsonFields(c, out, fields)
}

func uintString(v uint64) string { return strconv.FormatUint(v, 10) }

// extensionsScript is Argo CD's /extensions.js, which its UI's index loads
// in a script tag: the UI extensions of the installation, none here. A
// static file server in front passes it on, so the script is JavaScript
// and not the UI's index.
func extensionsScript(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/javascript; charset=utf-8", nil)
}

// appDetailsRequest is Argo CD's RepoAppDetailsQuery as its UI sends it.
type appDetailsRequest struct {
	Source *struct {
		RepoURL string `json:"repoURL"`
		Path    string `json:"path"`
	} `json:"source"`
	AppName     string `json:"appName"`
	AppProject  string `json:"appProject"`
	SourceIndex *int   `json:"sourceIndex"`
	VersionID   *int   `json:"versionId"`
}

// repoAppDetails answers Argo CD's POST /repositories/{repo}/appdetails,
// which its PARAMETERS tab reads: the source of an App this caller sees is
// a directory of manifests (the operator renders them; there are no Helm
// or Kustomize parameters to edit).
func (s *Server) repoAppDetails(c echo.Context) error {
	sc, err := scopeOf(c)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 1<<16))
	if err != nil {
		return errorf(http.StatusBadRequest, "the appdetails body could not be read")
	}
	var req appDetailsRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Source == nil || req.AppName == "" {
		return errorf(http.StatusBadRequest, `the appdetails body must be {"source":{"repoURL":…,"path":…},"appName":…}, as Argo CD's UI sends it`)
	}
	if repo, err := url.PathUnescape(c.Param("repo")); err != nil || repo != req.Source.RepoURL {
		return errorf(http.StatusBadRequest, "the path's repository and source.repoURL differ")
	}
	if !s.canSee(sc, req.AppName) {
		return errorf(http.StatusNotFound, "no application "+quoteShort(req.AppName)+" in your scope")
	}
	return c.JSON(http.StatusOK, map[string]any{"type": "Directory", "path": req.Source.Path, "directory": map[string]any{}})
}
