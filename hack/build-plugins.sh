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
