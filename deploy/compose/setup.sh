#!/bin/sh
# The one-shot setup of the local stack (docker-compose.yaml), run in the k3s
# image (busybox sh and kubectl) once k3s is up:
#   1. waits for k3s's kubeconfig and API server,
#   2. installs deploy/crds, deployd's namespace and its least-privilege
#      ServiceAccount and ClusterRole (deploy/rbac.yaml),
#   3. applies the sample fleet and writes each App's status, as the
#      operator would,
#   4. writes a kubeconfig for deployd that authenticates as the deployd
#      ServiceAccount (not as the cluster admin) to $KUBE_DIR.
# Running it again changes nothing that is already in place.
set -eu

ADMIN_KUBECONFIG=${ADMIN_KUBECONFIG:-/k3s-output/kubeconfig.yaml} # written by k3s
SERVER=${SERVER:-https://k3s:6443}    # the API server as deployd's network sees it
DEPLOY_DIR=${DEPLOY_DIR:-/deploy}     # the repository's deploy/ folder
KUBE_DIR=${KUBE_DIR:-/kube}           # deployd reads $KUBE_DIR/deployd.kubeconfig
TOKEN_DURATION=${TOKEN_DURATION:-8760h}
NAMESPACES="hanzo tenant-acme tenant-globex"

log() { echo "setup: $*"; }

log "waiting for $ADMIN_KUBECONFIG"
i=0
until [ -s "$ADMIN_KUBECONFIG" ]; do
	i=$((i + 1)); [ "$i" -le 300 ] || { log "k3s wrote no kubeconfig in 5 minutes"; exit 1; }
	sleep 1
done

# k3s writes its kubeconfig for https://127.0.0.1:6443; from this container
# the API server is $SERVER (its certificate carries the name, see --tls-san).
admin=$(mktemp)
trap 'rm -f "$admin"' EXIT
sed -E "s#server: https://127\.0\.0\.1:[0-9]+#server: $SERVER#" "$ADMIN_KUBECONFIG" > "$admin"
export KUBECONFIG="$admin"

log "waiting for the API server at $SERVER"
i=0
until kubectl get --raw /readyz > /dev/null 2>&1; do
	i=$((i + 1)); [ "$i" -le 300 ] || { log "the API server was not ready in 5 minutes"; exit 1; }
	sleep 1
done

log "installing the CRDs, deployd's namespace and its RBAC"
kubectl apply --server-side --field-manager=deployd-setup -f "$DEPLOY_DIR/crds/"
kubectl wait --for=condition=Established --timeout=120s -f "$DEPLOY_DIR/crds/"
kubectl apply --server-side --field-manager=deployd-setup -f "$DEPLOY_DIR/namespace.yaml" -f "$DEPLOY_DIR/rbac.yaml"

log "applying the sample fleet"
for ns in $NAMESPACES; do
	kubectl create namespace "$ns" --dry-run=client -o yaml |
		kubectl apply --server-side --field-manager=deployd-setup -f -
done
kubectl apply --server-side --field-manager=deployd-setup -f "$DEPLOY_DIR/compose/sample-fleet.yaml"
# The App statuses, as the operator reports them. Only Apps lack the
# managed-by label (the operator sets it on what it renders).
kubectl apply --server-side --field-manager=hanzo-operator --subresource=status \
	--selector='!app.kubernetes.io/managed-by' -f "$DEPLOY_DIR/compose/sample-fleet.yaml"

log "writing $KUBE_DIR/deployd.kubeconfig (ServiceAccount deployd/deployd)"
ca=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
token=$(kubectl -n deployd create token deployd --duration="$TOKEN_DURATION")
tmp="$KUBE_DIR/.deployd.kubeconfig.tmp"
umask 077
cat > "$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: k3s
  cluster:
    server: $SERVER
    certificate-authority-data: $ca
users:
- name: deployd
  user:
    token: $token
contexts:
- name: k3s
  context:
    cluster: k3s
    user: deployd
current-context: k3s
EOF
# deployd runs as 65532 (distroless nonroot); only it may read the token.
chown "${DEPLOYD_UID:-65532}:${DEPLOYD_UID:-65532}" "$tmp" 2>/dev/null || chmod 0644 "$tmp"
mv "$tmp" "$KUBE_DIR/deployd.kubeconfig"
log "done"
