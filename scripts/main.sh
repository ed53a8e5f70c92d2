#!/usr/bin/env bash
# cuvmm's main job (the README's first quick-start command): installs what is missing (Debian 12),
# builds, reports what this machine's GPU(s) can do for virtual memory management (cuvmm-info), and
# runs the capacity-planning tool's quick profile (cuvmm-plan: about a minute on a GPU), writing
# JSON, CSV and plots to build/plan. With no GPU or driver it says so, runs the host-backend
# profile instead (seconds) and still succeeds. Extra arguments go to cuvmm-plan (e.g.
# `--profile full`, `--trace FILE`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
[ -f build/build.ninja ] || meson setup build
meson compile -C build cuvmm-info cuvmm-plan
build/tools/cuvmm-info
echo
build/tools/cuvmm-plan/cuvmm-plan --profile quick --out build/plan "$@"
