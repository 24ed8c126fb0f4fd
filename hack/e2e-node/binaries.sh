#!/usr/bin/env bash
# Builds what a node downloads or runs that no reachable site serves, from the Go module proxy, into the node
# e2e cache, and lays the downloads out as a local "binary mirror" with the layout of the upstream sites:
#
#   <mirror>/kubernetes/<kube>/bin/linux/amd64/{kubelet,kubeadm,kubectl}[.sha256]   (dl.k8s.io; controller flag
#                                                                                 -node-binary-base-url=<mirror>/kubernetes)
#   <mirror>/cni/<cni>/cni-plugins-linux-amd64-<cni>.tgz[.sha256]                  (GitHub releases; plugin config cniBaseURL)
#   <mirror>/cri-tools/<crictl>/crictl-<crictl>-linux-amd64.tar.gz[.sha256]       (GitHub releases; plugin config criToolsBaseURL)
#
# and, outside the mirror, binaries the harness itself uses:
#
#   <cache>/bin/containerd-<ver>/{containerd,containerd-shim-runc-v2,ctr}   baked into the node rootfs (rootfs.sh)
#   <cache>/bin/ignition-<ver>                                               applies Ignition configs to a rootfs
#
# Every artifact's path carries its version, and a build is skipped when the artifact is there, so a warm run
# costs nothing. Prints nothing on stdout; `binaries.sh env` prints the paths as shell assignments.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"            # same as hack/control-plane.sh: the node joins that API server
CNI_VERSION="${CNI_VERSION:-v1.9.1}"               # the debian plugin's default cniVersion
CRICTL_VERSION="${CRICTL_VERSION:-v1.36.0}"        # the debian plugin's default: v1.<kubelet minor>.0
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.2.9}" # the debian plugin wants containerd 2.x (default pattern 2.2*)
IGNITION_VERSION="${IGNITION_VERSION:-v2.24.0}"
ARCH=amd64

CACHE="${OSM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/osm}/e2e-node"
MIRROR="${CACHE}/mirror"
SRC="${CACHE}/src"
BIN="${CACHE}/bin"
KUBE_DIR="${MIRROR}/kubernetes/${KUBE_VERSION}/bin/linux/${ARCH}"
CNI_TGZ="${MIRROR}/cni/${CNI_VERSION}/cni-plugins-linux-${ARCH}-${CNI_VERSION}.tgz"
CRICTL_TGZ="${MIRROR}/cri-tools/${CRICTL_VERSION}/crictl-${CRICTL_VERSION}-linux-${ARCH}.tar.gz"
CONTAINERD_DIR="${BIN}/containerd-${CONTAINERD_VERSION}"
IGNITION_BIN="${BIN}/ignition-${IGNITION_VERSION}"

if [[ "${1:-}" == env ]]; then
  cat <<EOF
E2E_CACHE=${CACHE}
E2E_MIRROR=${MIRROR}
E2E_KUBE_VERSION=${KUBE_VERSION}
E2E_CNI_VERSION=${CNI_VERSION}
E2E_CRICTL_VERSION=${CRICTL_VERSION}
E2E_CONTAINERD_DIR=${CONTAINERD_DIR}
E2E_IGNITION=${IGNITION_BIN}
EOF
  exit 0
fi

log() { echo "e2e-node/binaries: $*" >&2; }
export GOFLAGS="-buildvcs=false"
export GOOS=linux GOARCH="${ARCH}"
gover="$(go env GOVERSION | sed 's/^go//; s/\([0-9]*\.[0-9]*\).*/\1/')"

# publish writes <file>.sha256 next to a mirrored file: the bare digest for dl.k8s.io, "digest  name" for
# GitHub releases, as the upstream sites do (the node's download() takes the first field either way).
publish() {
  local file="$1" style="$2" sum
  sum="$(sha256sum "${file}" | cut -d' ' -f1)"
  if [[ "${style}" == bare ]]; then echo "${sum}" >"${file}.sha256"; else echo "${sum}  $(basename "${file}")" >"${file}.sha256"; fi
}

# scratch prepares a module directory that requires module@version and imports pkgs from a tools.go (a build
# tag no build uses), so that `go mod tidy` records exactly what building pkgs needs.
scratch() {
  local dir="$1" module="$2" version="$3"; shift 3
  mkdir -p "${dir}"
  printf 'module osm.local/e2e-node/scratch\n\ngo %s\n\nrequire %s %s\n' "${gover}" "${module}" "${version}" >"${dir}/go.mod"
  { printf '//go:build tools\n\npackage tools\n\nimport (\n'; printf '\t_ "%s"\n' "$@"; printf ')\n'; } >"${dir}/tools.go"
  (cd "${dir}" && go mod tidy >&2)
}

# moddir prints where the module cache holds module@version.
moddir() { (cd "${SRC}" && go mod download -json "$1@$2" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'); }

build_kube() {
  [[ -x "${KUBE_DIR}/kubelet" && -x "${KUBE_DIR}/kubeadm" && -x "${KUBE_DIR}/kubectl" && -f "${KUBE_DIR}/kubectl.sha256" ]] && return
  local dir="${SRC}/kube-${KUBE_VERSION}" staging="v0.${KUBE_VERSION#v1.}" modfile tmp
  log "building kubelet, kubeadm and kubectl ${KUBE_VERSION} (several minutes when cold)"
  mkdir -p "${dir}"
  modfile="$(cd "${dir}" && go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  # Like hack/control-plane.sh: k8s.io/kubernetes replaces its staging modules with local paths, which a
  # module outside its tree must replace with their published v0.<minor>.<patch> versions.
  {
    printf 'module osm.local/e2e-node/kube\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "${gover}" "${KUBE_VERSION}"
    grep -E '^\s+k8s.io/[a-z0-9-]+ => ./staging/' "${modfile}" | awk -v v="${staging}" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"${dir}/go.mod"
  cat >"${dir}/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  # The version the binaries report (kubelet --version, the Node's kubeletVersion, kubeadm's checks) is stamped
  # at link time, as the upstream release build does; without it they report v0.0.0-master.
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
    ld+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
  tmp="$(mktemp -d "${CACHE}/tmp.XXXXXX")"
  (cd "${dir}" && go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath -ldflags "${ld}" -o "${tmp}/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubectl >&2)
  mkdir -p "${KUBE_DIR}"
  for b in kubelet kubeadm kubectl; do
    mv "${tmp}/${b}" "${KUBE_DIR}/${b}"
    publish "${KUBE_DIR}/${b}" bare
  done
  rm -rf "${tmp}"
}

build_cni() {
  [[ -f "${CNI_TGZ}.sha256" ]] && return
  local dir="${SRC}/cni-${CNI_VERSION}" tmp pkgs
  log "building the CNI plugins ${CNI_VERSION}"
  # Every Linux main package under plugins/ (the release tarball's set: bridge, host-local, loopback, portmap, ...).
  local src m=github.com/containernetworking/plugins
  src="$(moddir "${m}" "${CNI_VERSION}")"
  pkgs="$(cd "${src}" && grep -rl --include='*.go' '^package main' plugins | xargs -n1 dirname | sort -u | grep -v -e windows -e plugins/sample | sed "s|^|${m}/|")"
  # shellcheck disable=SC2086
  scratch "${dir}" "${m}" "${CNI_VERSION}" ${pkgs}
  tmp="$(mktemp -d "${CACHE}/tmp.XXXXXX")"
  # shellcheck disable=SC2086
  (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${CNI_VERSION}" -o "${tmp}/" ${pkgs} >&2)
  mkdir -p "$(dirname "${CNI_TGZ}")"
  tar --owner=0 --group=0 -czf "${CNI_TGZ}.tmp" -C "${tmp}" .
  mv "${CNI_TGZ}.tmp" "${CNI_TGZ}"
  publish "${CNI_TGZ}" named
  rm -rf "${tmp}"
}

build_crictl() {
  [[ -f "${CRICTL_TGZ}.sha256" ]] && return
  local dir="${SRC}/cri-tools-${CRICTL_VERSION}" tmp
  log "building crictl ${CRICTL_VERSION}"
  scratch "${dir}" sigs.k8s.io/cri-tools "${CRICTL_VERSION}" sigs.k8s.io/cri-tools/cmd/crictl
  tmp="$(mktemp -d "${CACHE}/tmp.XXXXXX")"
  (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRICTL_VERSION}" -o "${tmp}/crictl" sigs.k8s.io/cri-tools/cmd/crictl >&2)
  mkdir -p "$(dirname "${CRICTL_TGZ}")"
  tar --owner=0 --group=0 -czf "${CRICTL_TGZ}.tmp" -C "${tmp}" crictl
  mv "${CRICTL_TGZ}.tmp" "${CRICTL_TGZ}"
  publish "${CRICTL_TGZ}" named
  rm -rf "${tmp}"
}

build_containerd() {
  [[ -x "${CONTAINERD_DIR}/containerd" && -x "${CONTAINERD_DIR}/containerd-shim-runc-v2" && -x "${CONTAINERD_DIR}/ctr" ]] && return
  local dir="${SRC}/containerd-${CONTAINERD_VERSION}" tmp m=github.com/containerd/containerd/v2
  log "building containerd ${CONTAINERD_VERSION}"
  scratch "${dir}" "${m}" "${CONTAINERD_VERSION}" "${m}/cmd/containerd" "${m}/cmd/containerd-shim-runc-v2" "${m}/cmd/ctr"
  tmp="$(mktemp -d "${CACHE}/tmp.XXXXXX")"
  # Static, without the cgo-only snapshotters (btrfs, devmapper); overlayfs and native remain.
  (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "-s -w -X ${m}/version.Version=${CONTAINERD_VERSION} -X ${m}/version.Revision=module-proxy" \
      -o "${tmp}/" "${m}/cmd/containerd" "${m}/cmd/containerd-shim-runc-v2" "${m}/cmd/ctr" >&2)
  mkdir -p "${BIN}"
  rm -rf "${CONTAINERD_DIR}"
  mv "${tmp}" "${CONTAINERD_DIR}"
  chmod 0755 "${CONTAINERD_DIR}"
}

build_ignition() {
  [[ -x "${IGNITION_BIN}" ]] && return
  local dir="${SRC}/ignition-${IGNITION_VERSION}" m=github.com/coreos/ignition/v2
  log "building ignition ${IGNITION_VERSION} (needs libblkid-dev)"
  scratch "${dir}" "${m}" "${IGNITION_VERSION}" "${m}/internal"
  mkdir -p "${BIN}"
  # The real binary is the package "internal" (cmd/ignition is a stub). SELinux relabelling is off: the
  # target rootfs has no policy.
  (cd "${dir}" && CGO_ENABLED=1 go build -trimpath \
      -ldflags "-s -w -X ${m}/internal/version.Raw=${IGNITION_VERSION} -X ${m}/internal/distro.selinuxRelabel=false" \
      -o "${IGNITION_BIN}.tmp" "${m}/internal" >&2)
  mv "${IGNITION_BIN}.tmp" "${IGNITION_BIN}"
}

mkdir -p "${CACHE}" "${SRC}"
start=$(date +%s)
what=("$@")
[[ ${#what[@]} -eq 0 ]] && what=(kube cni crictl containerd ignition)
for w in "${what[@]}"; do "build_${w}"; done
log "ready in $(($(date +%s) - start))s: mirror ${MIRROR}"
