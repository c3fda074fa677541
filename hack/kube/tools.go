//go:build tools

// Package tools pins the Kubernetes binaries the integration tests run
// against (kubectl for make bench-engine and the engine's bench smoke).
// hack/build-tools.sh builds them; it is never imported.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
