#!/usr/bin/env bash
# Builds the stock Argo CD web UI (ui/ of argoproj/argo-cd v3.6.0) from its
# sources into a cache folder outside the repository, as Argo CD's Dockerfile
# does: the pnpm its package.json names, then NODE_ENV=production pnpm build.
# The browser test of the stock UI (cmd/deployd, TestStockArgoUI) serves the
# result in front of deployd.
#
# Its package.json takes argo-ui from a git URL; the build points it at a
# copy of argoproj/argo-ui beside it instead (file:../argo-ui), at the commit
# Argo CD pinned until July 2026, with react-toastify 11.1.0 (Argo CD's own)
# and its toast position as the string react-toastify 11 expects.
#
# Sources: each repository is a local git directory or a URL git can fetch:
#   DEPLOYD_ARGO_CD_GIT  (default: $DEPLOYD_GIT_MIRRORS/argoproj+argo-cd/repo
#                         when it exists, else https://github.com/argoproj/argo-cd.git)
#   DEPLOYD_ARGO_UI_GIT  (the same for argoproj/argo-ui)
#   DEPLOYD_GIT_MIRRORS  a folder of mirrors named owner+name (default /work/.mirror)
# Output: $DEPLOYD_ARGO_UI (default ~/.cache/deployd/argo-ui-v3.6.0)/app,
# built once; a stamp of this script's hash makes a changed recipe rebuild.
# Usage: hack/build-argo-ui.sh [--dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
argocd_commit=37ee0097cf851bc2dd7665fc081bbce61a7e836e # v3.6.0
argoui_commit=ad616de862f60d5348fe41ccaa72d7b74f9c3a13
out=${DEPLOYD_ARGO_UI:-$HOME/.cache/deployd/argo-ui-v3.6.0}
if [ "${1:-}" = "--dir" ]; then echo "$out/app"; exit 0; fi

stamp="$out/.stamp"
want=$(sha256sum "$here/build-argo-ui.sh" | cut -c1-16)
if [ -f "$out/app/index.html" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	exit 0
fi
for c in node npm git; do
	command -v "$c" >/dev/null || { echo "build-argo-ui: $c is needed (hack/install-packages.sh installs it)" >&2; exit 1; }
done

mirrors=${DEPLOYD_GIT_MIRRORS:-/work/.mirror}
source_of() { # source_of VAR owner+name URL
	local v=${!1:-}
	if [ -n "$v" ]; then echo "$v"; return; fi
	if [ -d "$mirrors/$2/repo" ]; then echo "$mirrors/$2/repo"; return; fi
	echo "$3"
}
argocd_src=$(source_of DEPLOYD_ARGO_CD_GIT argoproj+argo-cd https://github.com/argoproj/argo-cd.git)
argoui_src=$(source_of DEPLOYD_ARGO_UI_GIT argoproj+argo-ui https://github.com/argoproj/argo-ui.git)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# archive SRC COMMIT DEST [pathspec...]: the tree of COMMIT from a git
# directory, or fetched from a URL, unpacked into DEST.
archive() {
	local src=$1 commit=$2 dest=$3; shift 3
	local gd=$src
	if [ ! -d "$src" ]; then
		gd="$work/fetch-$(basename "$dest").git"
		git init -q --bare "$gd"
		git --git-dir="$gd" fetch -q --depth 1 "$src" "$commit" || {
			echo "build-argo-ui: cannot fetch $commit from $src; set DEPLOYD_ARGO_CD_GIT / DEPLOYD_ARGO_UI_GIT to a git directory holding it" >&2
			exit 1
		}
	fi
	git --git-dir="$gd" cat-file -e "$commit^{commit}" 2>/dev/null || {
		echo "build-argo-ui: $src does not hold commit $commit; set DEPLOYD_ARGO_CD_GIT / DEPLOYD_ARGO_UI_GIT to one that does" >&2
		exit 1
	}
	mkdir -p "$dest"
	git --git-dir="$gd" archive "$commit" -- "$@" | tar -x -C "$dest"
}

start=$SECONDS
echo "building the stock Argo CD UI (argo-cd ${argocd_commit:0:8}, argo-ui ${argoui_commit:0:8}) into $out" >&2
archive "$argocd_src" "$argocd_commit" "$work" ui
# argo-ui without its docs (screenshots only).
archive "$argoui_src" "$argoui_commit" "$work/argo-ui" . ':(exclude)docs'

sed -i 's/"react-toastify": "[^"]*"/"react-toastify": "11.1.0"/' "$work/argo-ui/package.json"
sed -i "s/toast\.POSITION\.BOTTOM_RIGHT/'bottom-right'/" "$work/argo-ui/src/components/notifications/notifications.tsx"
sed -i 's|"argo-ui": "git+https://github.com/argoproj/argo-ui.git#[0-9a-f]*"|"argo-ui": "file:../argo-ui"|' "$work/ui/package.json"
grep -q '"argo-ui": "file:../argo-ui"' "$work/ui/package.json" || { echo "build-argo-ui: ui/package.json names argo-ui otherwise than expected" >&2; exit 1; }
grep -q "'bottom-right'" "$work/argo-ui/src/components/notifications/notifications.tsx" || { echo "build-argo-ui: argo-ui's toast position not found" >&2; exit 1; }

# The pnpm version package.json names, installed beside the build.
pm=$(node -p 'require(process.argv[1]).packageManager' "$work/ui/package.json")
case $pm in pnpm@*) ;; *) echo "build-argo-ui: packageManager is $pm, want pnpm@…" >&2; exit 1 ;; esac
npm install --silent --no-fund --no-audit --prefix "$work/pnpm" "$pm" >&2
pnpm="$work/pnpm/node_modules/.bin/pnpm"

(cd "$work/ui" && "$pnpm" install --no-frozen-lockfile --reporter=append-only >&2)
(cd "$work/ui" && NODE_ENV=production "$pnpm" build >"$work/build.log" 2>&1) || { tail -40 "$work/build.log" >&2; exit 1; }
[ -f "$work/ui/dist/app/index.html" ] || { echo "build-argo-ui: no dist/app/index.html after the build" >&2; exit 1; }

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
# Source maps are not served; they are most of the size.
(cd "$work/ui/dist/app" && find . -name '*.map' -delete && cp -r . "$out.tmp/app")
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$want" > "$stamp"
echo "built the stock Argo CD UI in $((SECONDS - start))s: $out/app" >&2
