#!/usr/bin/env bash
# Installs the Debian packages the tests need (the real consumers' validators and the node e2e tooling) when
# they are missing. Runs apt-get as root, or through sudo when not root.
# Usage: hack/install-deps.sh [group ...]   groups: validate (default), node-e2e
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
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2 || true
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
