package projection

import "strings"

// The /v1/paas drift board: one AppView per operator App.

// DriftSeverity is ok, yellow or red.
type DriftSeverity string

// The severities, from best to worst.
const (
	SeverityOK     DriftSeverity = "ok"
	SeverityYellow DriftSeverity = "yellow"
	SeverityRed    DriftSeverity = "red"
)

func (s DriftSeverity) rank() int {
	switch s {
	case SeverityRed:
		return 2
	case SeverityYellow:
		return 1
	}
	return 0
}

// DriftKind names one drift rule.
type DriftKind string

// The drift rules.
const (
	DriftFloatingDeclared DriftKind = "floating-declared"
	DriftFloatingRunning  DriftKind = "floating-running"
	DriftStale            DriftKind = "stale"
	DriftUnrolled         DriftKind = "un-rolled"
	DriftNoRelease        DriftKind = "no-release"
	DriftZeroAssets       DriftKind = "zero-assets"
)

// DriftFlag is one finding.
type DriftFlag struct {
	Kind     DriftKind     `json:"kind"`
	Severity DriftSeverity `json:"severity"`
	Message  string        `json:"message"`
}

// Drift is the verdict for one row: the flags and their maximum severity.
type Drift struct {
	Severity DriftSeverity `json:"severity"`
	Flags    []DriftFlag   `json:"flags"`
}

// Release is what a release source knows of an app's releases.
type Release struct {
	LatestTag string // the newest released tag
	// DeclaredURL is the release page of the declared tag, "" when the
	// declared tag has no release; DeclaredAssets its asset count.
	DeclaredURL    string
	DeclaredAssets int
	// TagsOnly says the source knows tags but not releases (a registry):
	// no-release and zero-assets are not computed.
	TagsOnly bool
	// Status is "" when every configured source answered for this app;
	// otherwise "pending" (not fetched yet) or "error (<reason>)" (the
	// last fetch failed, the reason safe to show). Then no release rule
	// is computed: an outage of a source never paints a row.
	Status string
}

// ReleaseStatusOK is AppView.Source when a release source answered.
const ReleaseStatusOK = "ok"

// Observed is what drift is computed from. Release is nil when no release
// source is configured: the release rules (no-release, zero-assets) are then
// not computed at all, rather than flagging every row.
type Observed struct {
	DeclaredTag string
	RunningTag  string
	Release     *Release
}

// ComputeDrift applies every drift rule independently. Flags is never nil.
func ComputeDrift(o Observed) Drift {
	flags := []DriftFlag{}
	declaredFloating := o.DeclaredTag != "" && !isRelease(o.DeclaredTag)
	if declaredFloating {
		flags = append(flags, DriftFlag{DriftFloatingDeclared, SeverityRed,
			"declared tag " + quote(o.DeclaredTag) + " is not a vX.Y.Z release; declare a release tag"})
	}
	runningFloating := o.RunningTag != "" && !isRelease(o.RunningTag)
	if runningFloating {
		flags = append(flags, DriftFlag{DriftFloatingRunning, SeverityRed,
			"running tag " + quote(o.RunningTag) + " is not a vX.Y.Z release"})
	}
	rel := o.Release
	if rel != nil && rel.Status != "" {
		rel = nil // pending or failed: the release rules are left out
	}
	latest := ""
	if rel != nil {
		latest = rel.LatestTag
	}
	if declared := releaseTag(o.DeclaredTag); IsSemverTag(declared) && IsSemverTag(latest) && declared != latest {
		flags = append(flags, DriftFlag{DriftStale, SeverityYellow,
			"a newer release " + latest + " exists; " + o.DeclaredTag + " is declared"})
	}
	if o.DeclaredTag != "" && o.RunningTag != "" && o.RunningTag != o.DeclaredTag && !runningFloating {
		flags = append(flags, DriftFlag{DriftUnrolled, SeverityYellow,
			o.DeclaredTag + " is declared but " + o.RunningTag + " is running"})
	}
	if rel != nil && !rel.TagsOnly && o.DeclaredTag != "" {
		if rel.DeclaredURL == "" {
			flags = append(flags, DriftFlag{DriftNoRelease, SeverityRed,
				"no release found for the declared tag " + quote(o.DeclaredTag)})
		} else if rel.DeclaredAssets == 0 {
			flags = append(flags, DriftFlag{DriftZeroAssets, SeverityRed,
				"the release of " + o.DeclaredTag + " has no assets"})
		}
	}
	return Drift{Severity: SeverityOf(flags), Flags: flags}
}

// SeverityOf is the maximum severity over flags, ok for none.
func SeverityOf(flags []DriftFlag) DriftSeverity {
	sev := SeverityOK
	for _, f := range flags {
		if f.Severity.rank() > sev.rank() {
			sev = f.Severity
		}
	}
	return sev
}

func quote(s string) string { return "\"" + s + "\"" }

// releaseTag is the tag part of a version: "v1.2.3@sha256:…" pins the
// release v1.2.3 to a digest.
func releaseTag(version string) string {
	tag, _, _ := strings.Cut(version, "@")
	return tag
}

// isRelease reports whether a version names a vX.Y.Z release, digest-pinned
// or not.
func isRelease(version string) bool { return IsSemverTag(releaseTag(version)) }

// AppView is one row of the drift board.
type AppView struct {
	ID          string   `json:"id"` // <org>/<app>/<env>
	Org         string   `json:"org"`
	App         string   `json:"app"`
	Env         string   `json:"env"`
	Repo        string   `json:"repo"`
	Registry    string   `json:"registry"`
	Role        string   `json:"role"`
	DeclaredTag string   `json:"declaredTag"`
	RunningTag  string   `json:"runningTag"`
	LatestTag   string   `json:"latestTag"`
	Health      string   `json:"health"` // green, yellow, red, "" (unknown)
	Phase       string   `json:"phase"`
	Cluster     string   `json:"cluster"`
	Namespace   string   `json:"namespace"`
	Endpoints   []string `json:"endpoints"`
	Drift       Drift    `json:"drift"`
	// Source is the release source's state for this row: "ok",
	// "pending" or "error (<reason>)"; absent when none is configured.
	Source string `json:"source,omitempty"`
}

// View is the row on the drift board. The org is the owner in the image
// repository path (ghcr.io/hanzoai/iam → hanzoai); rel is the release
// source's answer for this app, nil when none is configured.
func (a *App) View(cluster string, rel *Release) AppView {
	registry, owner, repo := RepoParts(a.Repository)
	v := AppView{
		ID:          owner + "/" + a.Name + "/" + a.Env,
		Org:         owner,
		App:         a.Name,
		Env:         a.Env,
		Repo:        repo,
		Registry:    registry,
		Role:        a.Role,
		DeclaredTag: a.Declared,
		RunningTag:  a.Running,
		Health:      healthColour(a.Health.Status),
		Phase:       a.Phase,
		Cluster:     cluster,
		Namespace:   a.Namespace,
		Endpoints:   nonNil(a.Endpoints),
		Drift:       ComputeDrift(Observed{DeclaredTag: a.Declared, RunningTag: a.Running, Release: rel}),
	}
	if rel != nil {
		v.LatestTag = rel.LatestTag
		v.Source = rel.Status
		if v.Source == "" {
			v.Source = ReleaseStatusOK
		}
	}
	return v
}

func healthColour(c HealthCode) string {
	switch c {
	case HealthHealthy:
		return "green"
	case HealthProgressing, HealthSuspended:
		return "yellow"
	case HealthDegraded, HealthMissing:
		return "red"
	}
	return ""
}
