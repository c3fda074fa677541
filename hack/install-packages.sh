#!/usr/bin/env bash
# Installs the Debian packages the browser tests need (chromium and its
# driver, and Node.js with npm to build the stock Argo CD UI), once. Runs as root on the CI machine; elsewhere it says what is
# missing and exits non-zero.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing packages: ${need[*]} (install them, or run make test as root)" >&2
	exit 1
fi
echo "installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
