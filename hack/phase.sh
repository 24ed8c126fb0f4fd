#!/usr/bin/env bash
# Runs a command as a named phase of `make test` and prints "phase NAME: Ns" when it ends (also when it fails),
# so a CI log says where the time went. Usage: hack/phase.sh NAME COMMAND [ARGS...]
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
status=""
[[ $rc -eq 0 ]] || status=" (FAILED, exit ${rc})"
echo "phase ${name}: $(($(date +%s) - start))s${status}"
exit $rc
