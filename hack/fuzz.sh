#!/usr/bin/env bash
# Runs every fuzz target of both modules (the root module and sdk/) for a bounded time each: the parsers of
# untrusted input — templates, wasm modules, OCI manifests and tarballs, MachineDeployment provider specs.
# A crash leaves its input under the package's testdata/fuzz/<Target>/, where `go test` replays it from then
# on as a regression test: commit it with the fix.
# New-coverage inputs are minimised for at most 5 runs: the archive target otherwise spends minutes on each.
# Usage: hack/fuzz.sh [duration per target, default 30s]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fuzztime="${1:-${FUZZTIME:-30s}}"
export GOFLAGS="-buildvcs=false ${GOFLAGS:-}"

run_module() {
  local dir="$1" exclude="$2" # exclude: a nested module's directory, which its own run covers
  cd "${root}/${dir}"
  # "<package dir> <target>" for every func FuzzXxx(f *testing.F) in a _test.go file.
  { grep -rlE --include='*_test.go' --exclude-dir="${exclude:-.git}" '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . || true; } | sort | while read -r file; do
    pkg="./$(dirname "${file#./}")"
    grep -oE '^func Fuzz[A-Za-z0-9_]*' "${file}" | sed 's/^func //' | while read -r target; do
      echo "fuzz: ${dir:-.} ${pkg} ${target} for ${fuzztime}" >&2
      go test "${pkg}" -run '^$' -fuzz "^${target}\$" -fuzztime "${fuzztime}" -fuzzminimizetime 5x
    done
  done
}

run_module "" sdk
run_module sdk examples
