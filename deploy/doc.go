// Package deploy holds what runs deployd outside a Go test: the manifests
// of this folder (CRDs, namespace, least-privilege RBAC, a Deployment of two
// replicas with its PodDisruptionBudget, Service, applied with kubectl
// apply -k), and the files the local Docker stack of the repository's
// docker-compose.yaml mounts (compose/).
//
// The package has no code. Its tests check those files against the real
// things: every manifest is server-side dry-run applied to a real
// kube-apiserver (with the restricted Pod Security level warning on any
// violation), the sample fleet is applied for real, docker-compose.yaml is
// validated by docker compose itself, and the Dockerfile is checked to build
// with hack/build.sh, the script make build runs, whose binary is built and
// run.
package deploy
