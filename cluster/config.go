package cluster

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Source says where the rest config comes from: an explicit kubeconfig
// (--kubeconfig), else $KUBECONFIG, else the in-cluster service account;
// Context picks a kubeconfig context.
type Source struct {
	Kubeconfig string
	Context    string
}

// ErrNotConfigured is returned when no configuration can be resolved.
var ErrNotConfigured = errors.New("no Kubernetes configuration")

// RESTConfig resolves the configuration. It also returns where it came
// from, for the log. The error names what was tried.
func RESTConfig(src Source) (*rest.Config, string, error) {
	path := src.Kubeconfig
	origin := "--kubeconfig"
	if path == "" {
		path, origin = os.Getenv("KUBECONFIG"), "KUBECONFIG"
	}
	if path != "" {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
		if origin == "KUBECONFIG" {
			rules = &clientcmd.ClientConfigLoadingRules{Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence}
		}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: src.Context}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("%w: kubeconfig from %s (%s): %v", ErrNotConfigured, origin, path, err)
		}
		where := origin + " " + path
		if src.Context != "" {
			where += " context " + src.Context
		}
		return cfg, where, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("%w: no --kubeconfig, no KUBECONFIG, and not in a cluster (%v)", ErrNotConfigured, err)
	}
	return cfg, "in-cluster service account", nil
}
