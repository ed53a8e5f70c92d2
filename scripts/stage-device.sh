#!/usr/bin/env bash
# Copies what a device-machine run needs out of a build folder into STAGE (keeping the layout the
# executables' rpaths expect), plus the shared Google Benchmark library, which that machine lacks.
#   bash scripts/stage-device.sh BUILD_DIR STAGE_DIR
set -euo pipefail
build=${1:?build dir}
stage=${2:?stage dir}
rm -rf "$stage"
mkdir -p "$stage"
stage=$(cd "$stage" && pwd)
# The libraries (with their SONAME links) and every executable, at the same relative paths (their
# rpaths point at ../src).
(cd "$build" && find src tools bench test -maxdepth 2 \( -name 'libcuvmm*.so*' -o -type f -perm -u+x \) \
   ! -name '*.p' ! -path '*.p/*' -print0 | xargs -0 cp --parents -P -t "$stage")
find "$stage" -type f -exec strip --strip-debug {} + 2>/dev/null || true
cp -P /usr/lib/x86_64-linux-gnu/libbenchmark.so.1* "$stage/"
du -sh "$stage"
# The device tool carries at most 64 MiB: pack the stage (statically linked test programs compress
# well) and leave only the archive. On the device: mkdir -p S && tar -xJf STAGE/stage.tar.xz -C S.
if [ "${PACK:-1}" = 1 ]; then
  tar -C "$stage" -cJf "$stage.tar.xz" .
  rm -rf "$stage"
  mkdir -p "$stage"
  mv "$stage.tar.xz" "$stage/stage.tar.xz"
  du -sh "$stage/stage.tar.xz"
fi
