//go:build tools

// Package tools pins the Kubernetes control-plane binaries the integration
// tests run against. It is built by hack/build-kube.sh, never imported.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
