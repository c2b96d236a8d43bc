#!/usr/bin/env bash
# Lints the protos and fails when gen/ is not exactly what `buf generate` makes of them.
set -euo pipefail
cd "$(dirname "$0")/.."
buf lint
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
buf generate --output "$out"
if ! diff -r gen "$out/gen" >/dev/null; then
  echo "gen/ is stale: run 'npm run generate' and commit the result" >&2
  diff -r gen "$out/gen" | head -20 >&2
  exit 1
fi
echo "protos lint clean; gen/ is fresh"
