#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, etcd, kubectl) from the Go module proxy into a cache
# directory outside the repository, because no binary download is reachable from our machines. A build is
# skipped when the cache already holds binaries for the pinned versions. Prints the directory on stdout so
# callers can export KUBEBUILDER_ASSETS="$(hack/control-plane.sh)".
set -euo pipefail

# The API server is one minor behind the client libraries in go.mod (k8s.io/* v0.37), the skew client-go
# supports: the tests then cover clusters whose control plane is upgraded after OSM.
KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"   # k8s.io/kubernetes tag; staging modules use v0.<minor>.<patch>
ETCD_VERSION="${ETCD_VERSION:-v3.6.5}"    # go.etcd.io/etcd/server/v3 tag
CACHE_ROOT="${OSM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/osm}"
OUT="${CACHE_ROOT}/controlplane/kube-${KUBE_VERSION}-etcd-${ETCD_VERSION}-$(go env GOOS)-$(go env GOARCH)"

log() { echo "control-plane: $*" >&2; }

if [[ -x "${OUT}/kube-apiserver" && -x "${OUT}/etcd" && -x "${OUT}/kubectl" ]]; then
  log "cached in ${OUT}"
  echo "${OUT}"
  exit 0
fi

export GOFLAGS="-buildvcs=false ${GOFLAGS:-}"
export CGO_ENABLED=0
work="${CACHE_ROOT}/controlplane/src"
mkdir -p "${OUT}" "${work}"

build_kube() {
  local dir="${work}/kube-${KUBE_VERSION}"
  local staging="v0.${KUBE_VERSION#v1.}"
  mkdir -p "${dir}"
  log "building kube-apiserver and kubectl ${KUBE_VERSION} (staging ${staging}) — several minutes when cold"
  local modfile
  modfile="$(cd "${dir}" && go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  {
    echo "module osm.local/controlplane/kube"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    echo "require k8s.io/kubernetes ${KUBE_VERSION}"
    echo
    echo "replace ("
    # Every staging module k8s.io/kubernetes replaces with a local path is published at v0.<minor>.<patch>.
    grep -E '^\s+k8s.io/[a-z0-9-]+ => ./staging/' "${modfile}" | awk -v v="${staging}" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } > "${dir}/go.mod"
  cat > "${dir}/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
  (cd "${dir}" && go mod tidy >&2 && \
    go build -trimpath -ldflags "-s -w" -o "${OUT}/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2 && \
    go build -trimpath -ldflags "-s -w" -o "${OUT}/kubectl" k8s.io/kubernetes/cmd/kubectl >&2)
}

build_etcd() {
  local dir="${work}/etcd-${ETCD_VERSION}"
  mkdir -p "${dir}"
  log "building etcd ${ETCD_VERSION}"
  cat > "${dir}/main.go" <<'GO'
// Command etcd is the upstream etcd server entry point, built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "${dir}" && rm -f go.mod go.sum && go mod init osm.local/controlplane/etcd >/dev/null 2>&1 && \
    go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >&2 && go mod tidy >&2 && \
    go build -trimpath -ldflags "-s -w" -o "${OUT}/etcd" . >&2)
}

start=$(date +%s)
[[ -x "${OUT}/etcd" ]] || build_etcd
[[ -x "${OUT}/kube-apiserver" && -x "${OUT}/kubectl" ]] || build_kube
log "built in $(( $(date +%s) - start ))s into ${OUT}"
echo "${OUT}"
