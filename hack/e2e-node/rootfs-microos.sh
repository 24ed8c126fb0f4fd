#!/usr/bin/env bash
# Derives the MicroOS-shaped node image of the e2e harness from the Ignition-shaped one (rootfs-ignition.sh):
# the image the conformance run of a plugin for openSUSE MicroOS or SLE Micro boots
# (host/e2e/microos_test.go, TestNodes/MicroOSPluginConforms). Prints the tarball's path.
#
# - /boot/writable exists. That is the whole shape as far as the harness is concerned: it recognises a
#   MicroOS-shaped image by it (host/e2e/node_test.go, ignitionShapes), creates /boot/writable in the node's own
#   /boot file system, plays the image's remove-a-flag trigger (Ignition runs while
#   /boot/writable/firstboot_happened is missing, and the flag is created after it succeeded), and gives the
#   node a file system labelled "ignition" whose ignition/config.ign the played initramfs prefers to the
#   platform's user-data, as openSUSE's ignition-setup-user does.
# - Everything else is the Ignition-shaped image: no cloud-init; systemd, bash, curl, containerd 2.x,
#   conntrack, socat, ethtool and iptables, so the package step of sdk/examples/microos finds every package and
#   does not call transactional-update. No MicroOS-only tool is stubbed: the plugin's generated scripts need
#   none here (rpm runs only for extraPackages; firewalld.service is masked whether it exists or not;
#   update-ca-certificates and the SUSE trust store only with a host CA bundle, which the run does not set).
#
# Unpacking and packing again takes about 10-20 s on top of the Ignition-shaped image; the result is cached
# next to it, keyed by this script and that image.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
eval "$("${here}/binaries.sh" env)"
log() { echo "e2e-node/rootfs-microos: $*" >&2; }

base="$("${here}/rootfs-ignition.sh")"
key="$( { cat "$0"; basename "${base}"; } | sha256sum | cut -c1-16)"
out="${E2E_CACHE}/rootfs/microos-shaped-${key}.tar.zst"
if [[ -f "${out}" ]]; then
  log "cached: ${out}"
  echo "${out}"
  exit 0
fi

log "deriving the MicroOS-shaped image from ${base}"
start=$(date +%s)
tmp="$(mktemp -d "${E2E_CACHE}/rootfs/build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
mkdir "${tmp}/root"
tar --zstd -xpf "${base}" -C "${tmp}/root"
mkdir -p "${tmp}/root/boot/writable"
tar --zstd -cpf "${tmp}/rootfs.tar.zst" -C "${tmp}/root" .
mv "${tmp}/rootfs.tar.zst" "${out}"
# Images derived from older Ignition-shaped images are of no use any more.
find "${E2E_CACHE}/rootfs" -maxdepth 1 -name "microos-shaped-*.tar.zst" ! -path "${out}" -delete
log "derived in $(($(date +%s) - start))s: ${out} ($(du -h "${out}" | cut -f1))"
echo "${out}"
