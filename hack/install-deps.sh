#!/usr/bin/env bash
# Installs the Debian packages the tests need (the real consumers' validators and the node e2e tooling) when
# they are missing. Runs apt-get as root, or through sudo when not root.
#
# It never changes the host's packages without saying so: it prints every package it installs, and when
# installing them would also upgrade a package already on the host (systemd-container pulls the matching
# systemd, libsystemd0 and udev), it lists those upgrades and stops, unless OSM_INSTALL_DEPS_UPGRADE=1 says
# they are wanted.
#
# Usage: hack/install-deps.sh [group ...]   groups: validate (default), node-e2e
#        OSM_INSTALL_DEPS_UPGRADE=1 hack/install-deps.sh node-e2e   # allow the upgrades it listed
set -euo pipefail

groups=("$@")
[[ ${#groups[@]} -eq 0 ]] && groups=(validate)

want=()
for g in "${groups[@]}"; do
  case "$g" in
    validate) want+=(cloud-init) ;;
    node-e2e) want+=(cloud-init mmdebstrap zstd systemd-container libblkid-dev) ;;
    *) echo "install-deps: unknown group $g" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ "$(id -u)" -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2 || true

# A dry run lists what the install would do: "Inst pkg [installed version] (new version ...)" is an upgrade of
# a package the host has, "Inst pkg (version ...)" a new one.
plan="$($sudo apt-get install -s --no-install-recommends "${missing[@]}")"
upgrades="$(printf '%s\n' "$plan" | sed -n 's/^Inst \([^ ]*\) \[\([^]]*\)\] (\([^ ]*\).*/\1 \2 -> \3/p')"
new="$(printf '%s\n' "$plan" | sed -n 's/^Inst \([^ []*\) (\([^ ]*\).*/\1 \2/p')"
echo "install-deps: installing ${missing[*]}" >&2
if [[ -n "$new" ]]; then
  echo "install-deps: new packages:" >&2
  printf '%s\n' "$new" | sed 's/^/  /' >&2
fi
if [[ -n "$upgrades" ]]; then
  echo "install-deps: this also upgrades packages the host already has:" >&2
  printf '%s\n' "$upgrades" | sed 's/^/  /' >&2
  if [[ "${OSM_INSTALL_DEPS_UPGRADE:-}" != 1 ]]; then
    echo "install-deps: nothing installed; run again with OSM_INSTALL_DEPS_UPGRADE=1 to allow these upgrades, or install ${missing[*]} yourself" >&2
    exit 3
  fi
  echo "install-deps: OSM_INSTALL_DEPS_UPGRADE=1: upgrading them" >&2
fi
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
