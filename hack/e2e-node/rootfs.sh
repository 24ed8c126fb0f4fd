#!/usr/bin/env bash
# Builds the node image of the e2e harness: a Debian 12 (bookworm) minbase rootfs tarball that boots under
# systemd-nspawn, cached under <cache>/e2e-node/rootfs/ and keyed by everything that goes into it (this
# script, the package list, the mirror, the containerd build). Prints the tarball's path on stdout.
#
# What is in it, and why:
# - systemd, dbus, cloud-init: what a Debian cloud image boots with; cloud-init runs the user-data.
# - curl, ca-certificates, iproute2, jq, procps, kmod: what a Debian cloud image ships and the bootstrap and
#   osm-setup scripts call (curl, ip, sysctl, modprobe).
# - The packages osm-setup installs on every node (the debian plugin's basePackages: conntrack ebtables
#   ethtool iptables ipvsadm nfs-common socat ...): baked in so that osm-setup's `apt-get install` is a quick
#   no-op. osm-setup still runs `apt-get update` against the image's mirror, which the node reaches because
#   it shares the host's network.
# - containerd 2.x, "preinstalled" (the debian plugin's containerdSource=preinstalled): Debian 12's own
#   containerd is 1.6, too old for OSM's version 3 config.toml, and Docker's repository (the plugin's default
#   source) is not reachable from here. It is built from the Go module proxy (binaries.sh) and installed as
#   Docker's containerd.io package installs it (/usr/bin, /lib/systemd/system/containerd.service), with
#   Debian's runc.
# - nftables: for the harness, which lists the packet filter tables of the (shared) network namespace before
#   and after a boot, and removes what the node added.
# - No kubelet, CNI plugins or crictl: osm-setup downloads them from the binary mirror; that is under test.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
eval "$("${here}/binaries.sh" env)"
MIRROR_URL="${E2E_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
PACKAGES=(
  systemd systemd-sysv dbus cloud-init curl ca-certificates iproute2 jq procps kmod
  conntrack ebtables ethtool iptables ipvsadm nfs-common socat
  runc
  nftables
)

log() { echo "e2e-node/rootfs: $*" >&2; }

[[ -x "${E2E_CONTAINERD_DIR}/containerd" ]] || "${here}/binaries.sh" containerd
key="$( { cat "$0"; echo "${SUITE} ${MIRROR_URL} ${PACKAGES[*]}"; sha256sum "${E2E_CONTAINERD_DIR}"/*; } | sha256sum | cut -c1-16)"
out="${E2E_CACHE}/rootfs/debian-${SUITE}-${key}.tar.zst"
if [[ -f "${out}" ]]; then
  log "cached: ${out}"
  echo "${out}"
  exit 0
fi

mkdir -p "${E2E_CACHE}/rootfs"
tmp="$(mktemp -d "${E2E_CACHE}/rootfs/build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
cp "${E2E_CONTAINERD_DIR}"/* "${tmp}/"
# containerd's own unit file (containerd/containerd containerd.service), with the binary in /usr/bin where
# the containerd.io package puts it.
cat >"${tmp}/containerd.service" <<'UNIT'
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target dbus.service

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
UNIT

log "building the Debian ${SUITE} rootfs (about a minute)"
start=$(date +%s)
mmdebstrap --quiet --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --customize-hook="for b in containerd containerd-shim-runc-v2 ctr; do install -m 0755 ${tmp}/\$b \"\$1/usr/bin/\$b\"; done" \
  --customize-hook="install -m 0644 ${tmp}/containerd.service \"\$1/lib/systemd/system/containerd.service\"" \
  --customize-hook='rm -f "$1/etc/machine-id" "$1/var/lib/dbus/machine-id"; : >"$1/etc/machine-id"' \
  --customize-hook='rm -rf "$1/var/cache/apt/archives/"*.deb "$1/var/lib/apt/lists/"*_Packages' \
  "${SUITE}" "${tmp}/rootfs.tar.zst" "${MIRROR_URL}" >&2
mv "${tmp}/rootfs.tar.zst" "${out}"
# Older images (other keys) are of no use any more.
find "${E2E_CACHE}/rootfs" -maxdepth 1 -name "debian-${SUITE}-*.tar.zst" ! -path "${out}" -delete
log "built in $(($(date +%s) - start))s: ${out} ($(du -h "${out}" | cut -f1))"
echo "${out}"
