#!/usr/bin/env bash
# Builds cuvmm's API reference (HTML) from the public headers with Doxygen (docs/Doxyfile).
# Any Doxygen warning fails the build. Usage: bash scripts/docs.sh [OUTPUT_DIR]  (default: build-docs)
# Needs doxygen and python3 (bash scripts/setup-debian.sh installs both).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=$(realpath -m "${1:-build-docs}")

if ! command -v doxygen >/dev/null 2>&1; then
  echo "docs: doxygen not found (bash scripts/setup-debian.sh installs it)" >&2
  exit 1
fi
version=$(sed -n "s/^ *version: '\([^']*\)',\$/\1/p" meson.build | head -n 1)

rm -rf "$out/html"
mkdir -p "$out"
if ! CUVMM_DOCS_OUT=$out CUVMM_VERSION=$version doxygen docs/Doxyfile; then
  echo "docs: doxygen failed or warned (warnings are errors: docs/Doxyfile)" >&2
  exit 1
fi
echo "docs: API reference of cuvmm $version in $out/html/index.html"
