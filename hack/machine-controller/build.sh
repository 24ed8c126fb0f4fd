#!/usr/bin/env bash
# Builds machine-controller from a source checkout the user points at, with OSM's fake provider
# (hack/machine-controller/_fakeprovider/provider.go, written in this repository) in place of the published one, so
# that anyone can rerun host/e2e/machinecontroller; the Anexia provider is left out (below). The checkout is not modified: its tracked files are copied to
# a build directory under the cache first.
#
# usage: build.sh MACHINE_CONTROLLER_SRC
#   MACHINE_CONTROLLER_SRC: a checkout of kubermatic/machine-controller (checked at commit f1068332a).
# Prints the built binary's path on stdout; its CRDs are examples/machine-controller.yaml of the same source.
set -euo pipefail
src="$(cd "${1:?usage: build.sh MACHINE_CONTROLLER_SRC}" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
target="pkg/cloudprovider/provider/fake/provider.go"
[[ -f "${src}/${target}" && -f "${src}/cmd/machine-controller/main.go" ]] ||
  { echo "build.sh: ${src} is not a machine-controller checkout (no ${target})" >&2; exit 2; }

cache="${OSM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/osm}/machine-controller"
work="${cache}/src"
rm -rf "${work}"
mkdir -p "${work}"
# A git checkout copies its tracked files only; a plain directory copies whole.
if git -C "${src}" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "${src}" ls-files -z | (cd "${src}" && xargs -0 cp --parents -t "${work}")
  echo "build.sh: machine-controller at $(git -C "${src}" rev-parse --short HEAD)" >&2
else
  cp -a "${src}/." "${work}/"
fi
cp "${here}/_fakeprovider/provider.go" "${work}/${target}"
# The Anexia provider's SDK (go.anx.io/go-anxcloud) is not served by the Go module proxy these machines reach;
# the e2e uses the fake provider only, so the Anexia provider is left out of the registry.
sed -i '/provider\/anexia"$/d; /CloudProviderAnexia: func/,/},/d' "${work}/pkg/cloudprovider/provider.go"
(cd "${work}" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -o "${cache}/machine-controller" ./cmd/machine-controller) >&2
cp "${work}/examples/machine-controller.yaml" "${cache}/machine-controller.yaml"
echo "${cache}/machine-controller"
