#!/usr/bin/env bash
# Builds the default OS plugins (plugins/<os>/, Go main packages) to WebAssembly in plugins/dist/, where the
# controller and osmctl embed them. A plugin is rebuilt only when its sources, the SDK or go.sum changed.
# Usage: hack/build-plugins.sh [name ...]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
dist="plugins/dist"
mkdir -p "${dist}"

names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for d in plugins/*/; do
    n="$(basename "$d")"
    [[ "$n" == _* || "$n" == dist ]] && continue
    [[ -f "$d/main.go" ]] && names+=("$n")
  done
fi

export GOFLAGS="-buildvcs=false ${GOFLAGS:-}"
for n in "${names[@]}"; do
  src="plugins/${n}"
  # Every plugin depends on the SDK (its node kit included) and may share code under plugins/, so the key covers
  # plugins/ except the build output, and sdk/ except the examples (separate modules or not plugin code).
  sum="$( (echo "${n}"; go env GOVERSION; cat go.mod go.sum $(find plugins sdk -path plugins/dist -prune -o -path sdk/examples -prune -o -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' -o -name '*.tmpl' \) -print | sort)) | sha256sum | cut -c1-64)"
  if [[ -f "${dist}/${n}.wasm" && -f "${dist}/${n}.wasm.sha256" && -f "${dist}/${n}.sum" && "$(cat "${dist}/${n}.sum")" == "${sum}" ]]; then
    continue
  fi
  echo "plugins: building ${n}" >&2
  GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -ldflags="-s -w" -o "${dist}/${n}.wasm.tmp" "./${src}"
  mv "${dist}/${n}.wasm.tmp" "${dist}/${n}.wasm"
  # The controller names a built-in by this digest without reading the module (host/plugin hashBuiltin).
  sha256sum "${dist}/${n}.wasm" | cut -c1-64 > "${dist}/${n}.wasm.sha256"
  echo "${sum}" > "${dist}/${n}.sum"
done

# The default plugins' machine code for this wazero version and architecture, compiled once here so that neither
# a pod (make image ships it next to the controller) nor a test compiles them (host/pluginhost Precompile,
# plugins.PrecompiledDir). Redone when a plugin, the runtime or the toolchain changed; a host that finds code of
# another version or architecture compiles, it never fails.
if [[ $# -eq 0 ]]; then
  compiled="plugins/compiled"
  stamp="$( (go env GOVERSION GOARCH; cat "${dist}"/*.wasm.sha256 go.sum $(find sdk/runtime host/pluginhost cmd/osm-plugin-host hack/build-plugins.sh ! -name '*_test.go' -type f | sort)) | sha256sum | cut -c1-64)"
  if [[ ! -f "${compiled}/stamp" || "$(cat "${compiled}/stamp")" != "${stamp}" ]]; then
    echo "plugins: precompiling the default plugins into ${compiled}" >&2
    rm -rf "${compiled}.tmp" && mkdir -p "${compiled}.tmp"
    go run ./cmd/osm-plugin-host precompile "${compiled}.tmp" "${dist}"/*.wasm
    # Again for the hosts of test binaries (make test), whose build information names no wazero version: the
    # same machine code, under the names they look for ("dev" in wazero's cache, "unknown" in the snapshots').
    go run -ldflags "-X github.com/tetratelabs/wazero/internal/version.version=dev -X github.com/osmhq/osm/sdk/runtime.linkedWazeroVersion=unknown" \
      ./cmd/osm-plugin-host precompile "${compiled}.tmp" "${dist}"/*.wasm
    echo "${stamp}" > "${compiled}.tmp/stamp"
    rm -rf "${compiled}" && mv "${compiled}.tmp" "${compiled}"
  fi
fi
