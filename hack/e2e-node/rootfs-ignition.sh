#!/usr/bin/env bash
# Derives the second node image of the e2e harness from the Debian one (rootfs.sh): an image shaped like the
# OSes provisioned by Ignition (Fedora CoreOS, Flatcar), which the conformance run of an Ignition plugin boots
# (host/e2e/conformance_test.go, TestNodes/ScaffoldedIgnitionPluginConforms). Prints the tarball's path.
#
# - No cloud-init (purged): nothing but Ignition and the plugin's handoff can provision it.
# - /boot and /opt/bin exist: the harness mounts a file system of the node's own on /boot, which the Fedora
#   CoreOS handoff remounts read-write to store Ignition's user config; the ignition family puts the node
#   binaries into /opt/bin.
# - What the ignition family expects of the image comes from the Debian one: systemd, containerd 2.x
#   (containerd.service, /usr/bin/containerd), bash, curl, iptables, conntrack, socat.
# - Ignition is not in the image: on those OSes it runs in the initramfs, before the root file system boots,
#   which the harness plays with the ignition binary of binaries.sh.
#
# Unpacking, purging and packing again takes about 10 s on top of the Debian image; the result is cached next
# to it, keyed by this script and that image.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
eval "$("${here}/binaries.sh" env)"
log() { echo "e2e-node/rootfs-ignition: $*" >&2; }

base="$("${here}/rootfs.sh")"
key="$( { cat "$0"; basename "${base}"; } | sha256sum | cut -c1-16)"
out="${E2E_CACHE}/rootfs/ignition-shaped-${key}.tar.zst"
if [[ -f "${out}" ]]; then
  log "cached: ${out}"
  echo "${out}"
  exit 0
fi

log "deriving the Ignition-shaped image from ${base}"
start=$(date +%s)
tmp="$(mktemp -d "${E2E_CACHE}/rootfs/build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
mkdir "${tmp}/root"
tar --zstd -xpf "${base}" -C "${tmp}/root"
chroot "${tmp}/root" dpkg --purge cloud-init >&2
rm -rf "${tmp}/root/etc/cloud" "${tmp}/root/var/lib/cloud"
mkdir -p "${tmp}/root/boot" "${tmp}/root/opt/bin"
tar --zstd -cpf "${tmp}/rootfs.tar.zst" -C "${tmp}/root" .
mv "${tmp}/rootfs.tar.zst" "${out}"
# Images derived from older Debian images are of no use any more.
find "${E2E_CACHE}/rootfs" -maxdepth 1 -name "ignition-shaped-*.tar.zst" ! -path "${out}" -delete
log "derived in $(($(date +%s) - start))s: ${out} ($(du -h "${out}" | cut -f1))"
echo "${out}"
