#!/usr/bin/env bash
# Installs what cuvmm needs on Debian 12 (bookworm): Meson >= 1.7 and Catch2 3.7 from
# bookworm-backports, Google Benchmark, Open MPI (libcuvmm_mpi and its test), matplotlib (cuvmm-plan's
# plots), CMake and pip (the package checks) and the rest from bookworm. The backports source is
# derived from the Debian entry already in apt's sources, so no mirror is named here.
# The CUDA Toolkit 13 (nvcc) is a prerequisite and is not installed by this script.
# Idempotent; needs root (or sudo).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

have_pkgs() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}

meson_ok() {
  command -v meson >/dev/null 2>&1 &&
    python3 - "$(meson --version)" <<'PY'
import sys
v = tuple(int(x) for x in sys.argv[1].split(".")[:2])
sys.exit(0 if v >= (1, 7) else 1)
PY
}

# cmake and python3-pip: the package checks (CMake consumer; CCCL, RMM and cuobjdump wheels); python3-venv and
# python3-dev: the PyTorch package's build and checks (virtual environments, Python's headers); doxygen: the API reference.
PKGS=(ninja-build pkg-config g++ libbenchmark-dev python3 python3-matplotlib clang-14 libclang-rt-14-dev libopenmpi-dev openmpi-bin
  cmake python3-pip python3-venv python3-dev doxygen libcli11-dev nlohmann-json3-dev)
BACKPORTS_PKGS=(meson libcatch2-dev)

if have_pkgs "${PKGS[@]}" "${BACKPORTS_PKGS[@]}" && meson_ok; then
  exit 0
fi

# Derive a bookworm-backports entry from the existing Debian (non-security) entry.
backports_list=/etc/apt/sources.list.d/cuvmm-bookworm-backports.sources
if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  uri=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    # deb822: the stanza whose Suites include plain "bookworm".
    uri=$(awk '
      /^URIs:/   { u = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") found = u }
      /^$/       { u = "" }
      END        { print found }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list)
  fi
  if [ -z "$uri" ]; then
    echo "setup: no Debian bookworm entry found in apt's sources; add bookworm-backports yourself" >&2
    exit 1
  fi
  $SUDO tee "$backports_list" >/dev/null <<SRC
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PKGS[@]}"
$SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports "${BACKPORTS_PKGS[@]}"
meson_ok || { echo "setup: meson >= 1.7 still missing" >&2; exit 1; }
