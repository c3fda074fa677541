package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/projection"
)

// DefaultName is the name of the cluster deployd runs in when
// DEPLOY_CLUSTER_NAME sets none: Argo CD's name for it.
const DefaultName = "in-cluster"

// DefaultServer is the server URL Argo CD gives the cluster it runs in.
const DefaultServer = "https://kubernetes.default.svc"

// nameRule is what a cluster's name may be: it is the part after the dot
// of a qualified namespace (projection.QualifyNamespace), so it is a DNS
// label of its own, and it keys positions and metrics.
var nameRule = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CheckName says what is wrong with a cluster's name; nil when it is one.
func CheckName(name string) error {
	if name == "" {
		return errors.New("is empty: name the cluster ([a-z0-9-], e.g. staging)")
	}
	if !nameRule.MatchString(name) {
		return fmt.Errorf("%q is not a cluster name: use lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 (e.g. staging, eu-west-1)", name)
	}
	return nil
}

// Entry is one cluster of DEPLOY_CLUSTERS_FILE: a cluster deployd serves
// besides the one it runs in.
type Entry struct {
	// Name is the cluster's name: unique, [a-z0-9-].
	Name string `json:"name"`
	// Kubeconfig is the path of the kubeconfig file that reaches it (a
	// mounted file: deployd never reads a Secret through the API).
	Kubeconfig string `json:"kubeconfig"`
	// Context picks one of the file's contexts; empty is its current one.
	Context string `json:"context,omitempty"`
	// Namespaces is the cluster's namespace map (DEPLOY_NAMESPACES' form);
	// empty is the first cluster's.
	Namespaces string `json:"namespaces,omitempty"`
	// Engine, when set, is the cluster's own git → cluster engine.
	Engine *EntryEngine `json:"engine,omitempty"`
}

// EntryEngine is the repository a cluster's engine applies.
type EntryEngine struct {
	Repo string `json:"repo"`
	Ref  string `json:"ref,omitempty"`
	Path string `json:"path,omitempty"`
	// WebhookSecretFile is the file holding the secret of this engine's
	// git webhook; without it the hook takes DEPLOY_ENGINE_WEBHOOK_SECRET.
	WebhookSecretFile string `json:"webhookSecretFile,omitempty"`
}

// Source is where the entry's rest config comes from.
func (e Entry) Source() Source { return Source{Kubeconfig: e.Kubeconfig, Context: e.Context} }

// NamespaceMap is the entry's namespace map, or def when it names none.
// ParseClusters checked it.
func (e Entry) NamespaceMap(def projection.Namespaces) projection.Namespaces {
	if e.Namespaces == "" {
		return def
	}
	ns, _ := projection.ParseNamespaces(e.Namespaces)
	return ns
}

// MaxClusters bounds the clusters a file may add: twice the 500 of the
// largest fleet measured (BENCHMARKS.md, "At Argo CD's largest scale").
// A row keeps its cluster's index in 16 bits (projection.Delta).
const MaxClusters = 1000

// ErrClustersFile marks an error of the clusters file.
var ErrClustersFile = errors.New("DEPLOY_CLUSTERS_FILE")

// entryFields are the fields an entry may have, in the order the file
// documents them.
var entryFields = []string{"name", "kubeconfig", "context", "namespaces", "engine"}

// ParseClusters reads the clusters file: a YAML document with a list
// `clusters:` of entries. first is the name of the cluster deployd runs in
// (DEPLOY_CLUSTER_NAME), which no entry may take. An error names the
// entry (by name, else by its place) and the field, and says what to
// write; it never echoes more of the file than a name.
func ParseClusters(data []byte, first string) ([]Entry, error) {
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: not YAML: %v", ErrClustersFile, yamlLine(err))
	}
	var doc struct {
		Clusters []json.RawMessage `json:"clusters"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: want a document `clusters:` holding a list of clusters, each with name and kubeconfig (%s)", ErrClustersFile, jsonReason(err))
	}
	if len(doc.Clusters) > MaxClusters {
		return nil, fmt.Errorf("%w: %d clusters: at most %d besides the first", ErrClustersFile, len(doc.Clusters), MaxClusters)
	}
	seen := map[string]int{first: 0}
	out := make([]Entry, 0, len(doc.Clusters))
	for i, m := range doc.Clusters {
		where := fmt.Sprintf("cluster %d", i+1)
		var probe struct {
			Name any `json:"name"`
		}
		if json.Unmarshal(m, &probe) == nil {
			if s, ok := probe.Name.(string); ok && nameRule.MatchString(s) {
				where = fmt.Sprintf("cluster %q", s)
			}
		}
		var e Entry
		d := json.NewDecoder(bytes.NewReader(m))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, fmt.Errorf("%w: %s: %s; an entry's fields are %s", ErrClustersFile, where, jsonReason(err), strings.Join(entryFields, ", "))
		}
		if err := CheckName(e.Name); err != nil {
			return nil, fmt.Errorf("%w: %s: name %v", ErrClustersFile, where, err)
		}
		if j, dup := seen[e.Name]; dup {
			if j == 0 {
				return nil, fmt.Errorf("%w: %s: name: %q is the cluster deployd runs in (DEPLOY_CLUSTER_NAME); give this one another name", ErrClustersFile, where, e.Name)
			}
			return nil, fmt.Errorf("%w: %s: name: cluster %d has this name too; names are unique", ErrClustersFile, where, j)
		}
		seen[e.Name] = i + 1
		if strings.TrimSpace(e.Kubeconfig) == "" {
			return nil, fmt.Errorf("%w: %s: kubeconfig is missing: give the path of a mounted kubeconfig file", ErrClustersFile, where)
		}
		if e.Namespaces != "" {
			if _, err := projection.ParseNamespaces(e.Namespaces); err != nil {
				return nil, fmt.Errorf("%w: %s: namespaces: %v", ErrClustersFile, where, err)
			}
		}
		if e.Engine != nil {
			if strings.TrimSpace(e.Engine.Repo) == "" {
				return nil, fmt.Errorf("%w: %s: engine.repo is missing: give the repository's URL (or remove engine)", ErrClustersFile, where)
			}
			if strings.HasPrefix(e.Engine.Path, "/") || strings.Contains("/"+e.Engine.Path+"/", "/../") {
				return nil, fmt.Errorf("%w: %s: engine.path %q: give a path inside the repository, relative, without ..", ErrClustersFile, where, e.Engine.Path)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// jsonReason is a decoding error without the decoder's prefix, in the
// file's terms.
func jsonReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s: want a %s, got a %s", te.Field, te.Type.Kind(), te.Value)
		}
		return fmt.Sprintf("want a %s, got a %s", te.Type.Kind(), te.Value)
	}
	s := strings.TrimPrefix(err.Error(), "json: ")
	return s
}

// yamlLine is a YAML error without the library's prefix.
func yamlLine(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "error converting YAML to JSON: ")
	return strings.TrimPrefix(s, "yaml: ")
}
