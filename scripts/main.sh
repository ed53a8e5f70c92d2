#!/usr/bin/env bash
# cuvmm's main job (the README's first quick-start command): installs what is missing (Debian 12),
# builds, and reports what this machine's GPU(s) can do for virtual memory management.
# With no GPU or driver it says so and still succeeds.
# (The capacity-planning run, cuvmm-plan, takes this place once it exists.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
[ -f build/build.ninja ] || meson setup build
meson compile -C build cuvmm-info
build/tools/cuvmm-info "$@"
