#!/usr/bin/env bash
# Installs a pinned development tool from the Go module proxy into the cache directory (outside the repository)
# and prints its path. Usage: hack/tools.sh golangci-lint
set -euo pipefail

CACHE_ROOT="${OSM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/osm}"
GOLANGCI_LINT_VERSION="v2.15.0"

case "${1:-}" in
  golangci-lint)
    dir="${CACHE_ROOT}/tools/golangci-lint-${GOLANGCI_LINT_VERSION}"
    if [[ ! -x "${dir}/golangci-lint" ]]; then
      echo "tools: installing golangci-lint ${GOLANGCI_LINT_VERSION}" >&2
      GOFLAGS=-buildvcs=false GOBIN="${dir}" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}" >&2
    fi
    echo "${dir}/golangci-lint"
    ;;
  *)
    echo "usage: $0 golangci-lint" >&2
    exit 2
    ;;
esac
