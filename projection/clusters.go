package projection

import (
	"fmt"
	"strings"
)

// The naming rule of several clusters. The first cluster (the one deployd
// runs in) keeps its namespaces: its Apps are named as they always were.
// Another cluster's objects are folded with the namespace
// "<namespace>.<cluster>" (hanzo.staging): a Kubernetes namespace is a DNS
// label, without a dot, so the first dot splits the two, and the name
// round-trips unchanged through the Argo CD UI's URLs
// (/applications/<appNamespace>/<name>) and ?appNamespace=. A tenant's
// namespace in another cluster is so "tenant-acme.staging", the same org.

// ClusterRef is a cluster the projection holds besides the first.
type ClusterRef struct {
	// Name is the cluster's name, the suffix of its qualified namespaces.
	Name string
	// Server is its API server's URL, the Applications' destination.
	Server string
	// Namespaces is its namespace map.
	Namespaces Namespaces
	// Engine is the source of the cluster's own engine, nil when it runs
	// none: an App that engine applied shows it as spec.source, as
	// Config.Engine does for the first cluster's.
	Engine *EngineSource
	// EngineInstance is that engine's instance (Config.EngineInstance's
	// rule).
	EngineInstance string
}

// QualifyNamespace is the namespace the projection gives a cluster's
// namespace ns: ns itself for the first cluster (cluster ""), else
// "<ns>.<cluster>", interned (Intern) as decoded namespaces are.
func QualifyNamespace(ns, cluster string) string {
	if cluster == "" {
		return ns
	}
	return Intern(ns + "." + cluster)
}

// SplitNamespace splits a qualified namespace into the cluster's own
// namespace and the cluster's name ("" for the first cluster).
func SplitNamespace(q string) (ns, cluster string) {
	ns, cluster, _ = strings.Cut(q, ".")
	return ns, cluster
}

// ClusterNames are the names of the clusters, the first's first; nil with
// one cluster.
func (c Config) ClusterNames() []string {
	if len(c.Clusters) == 0 {
		return nil
	}
	if c.names != nil {
		return c.names
	}
	names := make([]string, 0, 1+len(c.Clusters))
	names = append(names, c.firstName())
	for _, r := range c.Clusters {
		names = append(names, r.Name)
	}
	return names
}

func (c Config) firstName() string {
	if c.ClusterName == "" {
		return "in-cluster"
	}
	return c.ClusterName
}

// ClusterOf is the index of the cluster a qualified namespace belongs to
// (0: the first) and that cluster's namespace map; false for a cluster
// the configuration does not name.
func (c *Config) ClusterOf(q string) (int, *Namespaces, bool) {
	i := strings.IndexByte(q, '.')
	if i < 0 {
		return 0, &c.Namespaces, true
	}
	name := q[i+1:]
	for j := range c.Clusters {
		if c.Clusters[j].Name == name {
			return j + 1, &c.Clusters[j].Namespaces, true
		}
	}
	return 0, nil, false
}

// Env is the environment and tenant org of a qualified namespace, by its
// cluster's namespace map; false when that cluster does not watch it.
func (c *Config) Env(q string) (env, org string, ok bool) {
	_, m, known := c.ClusterOf(q)
	if !known {
		return "", "", false
	}
	ns, _ := SplitNamespace(q)
	return m.Env(ns)
}

// Cluster is the name and server of cluster i (0: the first).
func (c *Config) Cluster(i int) (name, server string) {
	if i <= 0 || i > len(c.Clusters) {
		return c.firstName(), c.ClusterServer
	}
	r := c.Clusters[i-1]
	return r.Name, r.Server
}

// clusterIndex is the index of the cluster of a qualified namespace (0 for
// one the configuration does not name: the fold refuses those).
func (s *Store) clusterIndex(q string) int {
	c, _, _ := s.cfg.ClusterOf(q)
	return c
}

// ClusterIndex is the index of the row's cluster (0: the first).
func (a *App) ClusterIndex() int {
	if a.cfg == nil {
		return 0
	}
	c, _, _ := a.cfg.ClusterOf(a.Namespace)
	return c
}

// IsNamespace reports whether q is a namespace as the projection names
// one: a DNS-1123 label, optionally qualified with a cluster's name (a
// DNS-1123 label too).
func IsNamespace(q string) bool {
	ns, cluster, qualified := strings.Cut(q, ".")
	return IsLabel(ns) && (!qualified || IsLabel(cluster))
}

// IsLabel reports whether s is a DNS-1123 label (lower-case letters,
// digits and '-', neither first nor last, 1 to 63 bytes), as every App,
// namespace, org and cluster name is: what validation.IsDNS1123Label
// accepts, without its regular expression and its error list, since names
// from paths and queries are checked on every read.
func IsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// foldUnreachable records since when cluster c has not answered (0: it
// answers) and derives its App rows again, which carry the condition.
func (s *Store) foldUnreachable(c int, since int64) error {
	if c < 0 || c > len(s.cfg.Clusters) {
		return fmt.Errorf("cluster %d: %w", c, ErrRejected)
	}
	if s.unreachable[c] == since {
		return nil
	}
	if since == 0 {
		delete(s.unreachable, c)
	} else {
		if s.unreachable == nil {
			s.unreachable = map[int]int64{}
		}
		s.unreachable[c] = since
	}
	for k, r := range s.rows {
		if s.clusterIndex(k.Namespace) == c {
			s.markFull(r)
		}
	}
	return nil
}

// unreachableEpoch is where AppMeta.Unreachable counts from: 2025-01-01
// UTC (32 bits of seconds last until 2161).
const unreachableEpoch = 1_735_689_600

// unreachableSince is since when the cluster of a qualified namespace has
// not answered, as AppMeta.Unreachable counts; 0 while it answers.
func (s *Store) unreachableSince(q string) uint32 {
	if len(s.unreachable) == 0 {
		return 0
	}
	at := s.unreachable[s.clusterIndex(q)]
	if at == 0 {
		return 0
	}
	return uint32(max(at-unreachableEpoch, 1))
}

// conditions are the row's status.conditions: one when its cluster does
// not answer.
func (a *App) conditions() []ApplicationCondition {
	if a.Unreachable == 0 || a.cfg == nil {
		return nil
	}
	name, _ := a.cfg.Cluster(a.ClusterIndex())
	at := Timestamp(unreachableEpoch + int64(a.Unreachable))
	return []ApplicationCondition{{Type: "ComparisonError", LastTransitionTime: at,
		Message: "cluster " + name + " has not answered since " + at + ": the application shows its last known state"}}
}
