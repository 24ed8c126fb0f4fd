#!/usr/bin/env bash
# Prepares what the node e2e boots from (hack/e2e-node/binaries.sh, then rootfs.sh and rootfs-ignition.sh) in
# the background while
# `make test` runs the Go tests, and waits for it before the node e2e.
#
# Cold, these builds are the largest part of a first `make test` (kubelet, containerd, CNI plugins, crictl and
# Ignition from source: 10–16 minutes on two cores; the rootfs 2), and the integration tests spend most of
# their time waiting on the API server, so the two overlap well. The builds run at the lowest CPU priority, so
# the tests keep theirs. Warm, both scripts find everything cached and return at once.
#
# Usage: prepare.sh start   start the builds in the background (once; the install step must have run)
#        prepare.sh wait    wait for them (or run them now if never started); prints their log on failure
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${OSM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/osm}/e2e-node"
mkdir -p "${cache}"
log="${cache}/prepare.log"
status="${cache}/prepare.status"
pidfile="${cache}/prepare.pid"

build() {
  local start=$SECONDS
  "${here}/binaries.sh" && "${here}/rootfs.sh" >/dev/null && "${here}/rootfs-ignition.sh" >/dev/null
  local rc=$?
  echo "e2e-prepare: binaries and rootfs in $((SECONDS - start))s (exit ${rc})"
  return $rc
}

case "${1:-}" in
  start)
    rm -f "${status}"
    ( set +e; nice -n 19 bash -c "$(declare -f build); here='${here}'; build" >"${log}" 2>&1; echo $? >"${status}" ) &
    echo $! >"${pidfile}"
    ;;
  wait)
    if [[ -f "${pidfile}" ]]; then
      pid=$(cat "${pidfile}")
      while [[ ! -f "${status}" ]] && kill -0 "${pid}" 2>/dev/null; do sleep 2; done
      rm -f "${pidfile}"
      if [[ -f "${status}" && "$(cat "${status}")" == 0 ]]; then
        tail -n 1 "${log}"
        exit 0
      fi
      echo "e2e-prepare: the background build failed or did not finish; building now" >&2
      tail -n 20 "${log}" >&2 || true
    fi
    build
    ;;
  *)
    echo "usage: $0 start|wait" >&2
    exit 2
    ;;
esac
