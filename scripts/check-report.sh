#!/usr/bin/env bash
# Opens cuvmm-plan's HTML report in headless Chromium, as a reader would, and checks it.
#
# usage: scripts/check-report.sh BUILD_DIR [OUT_DIR]
#        scripts/check-report.sh --report FILE [OUT_DIR]
#
#   1. runs BUILD_DIR's cuvmm-plan on the host-backend quick profile (no plots) into a temporary
#      directory (with --report: takes FILE, a report.html from any run, e.g. a GPU's, instead);
#   2. installs Chromium when it is missing (Debian's package, with apt-get: as root, or through
#      sudo without a password);
#   3. shows that the console check catches what it must: a page that logs to the console and a
#      page whose Content-Security-Policy blocks a load must both be refused;
#   4. loads report.html with the console logged: any console message fails (the report has no
#      script, so a message can only be a blocked load or a parse error);
#   5. checks the rendered DOM for what a reader needs: every section, the recommendation in
#      words, the host-backend warning (not asked of a --report FILE), the machine's versions and
#      the inline charts;
#   6. takes a screenshot and checks it is a PNG of the window's size.
# Leaves report.html, the rendered DOM, Chromium's log and report.png in OUT_DIR (default
# BUILD_DIR/report-check, or report-check beside FILE) and prints the screenshot's path. Exits
# non-zero on any failure.
set -euo pipefail

usage() {
  echo "usage: $0 BUILD_DIR [OUT_DIR]" >&2
  echo "       $0 --report FILE [OUT_DIR]" >&2
  exit 2
}
given_report=
if [ "${1:-}" = "--report" ]; then
  shift
  if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -f "$1" ]; then usage; fi
  given_report=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  out=${2:-$(dirname "$given_report")/report-check}
else
  if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then usage; fi
  build=$(cd "$1" && pwd)
  out=${2:-$build/report-check}
  plan=$build/tools/cuvmm-plan/cuvmm-plan
fi
width=1280
height=6400  # the whole host-backend report

fail() {
  echo "check-report: $*" >&2
  exit 1
}

[ -n "$given_report" ] || [ -x "$plan" ] || fail "no cuvmm-plan at $plan (meson compile -C $1 cuvmm-plan)"

work=$(mktemp -d "${TMPDIR:-/tmp}/cuvmm-report-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
# Only the files this check writes are replaced: OUT_DIR may hold others.
rm -f "$out/cuvmm-plan.log" "$out/report.dom.html" "$out/chromium.log" "$out/report.png"

# 1. The report of the host-backend quick profile, or the one given.
if [ -n "$given_report" ]; then
  report=$given_report
else
  "$plan" --backend host --profile quick --no-plots --out "$work/plan" >"$out/cuvmm-plan.log" 2>&1 ||
    { cat "$out/cuvmm-plan.log" >&2; fail "cuvmm-plan failed"; }
  report=$work/plan/report.html
  grep -qx "Report: $report" "$out/cuvmm-plan.log" || fail "cuvmm-plan did not print 'Report: $report' (see $out/cuvmm-plan.log)"
fi
[ "$report" -ef "$out/report.html" ] || cp "$report" "$out/report.html"

# 2. Chromium, Debian's package.
find_chromium() {
  local name
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}
if ! browser=$(find_chromium); then
  echo "check-report: installing chromium (Debian's package)"
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
  else
    fail "chromium is missing and cannot be installed here (run as root, or apt-get install chromium)"
  fi
  browser=$(find_chromium) || fail "chromium was installed but is not on PATH"
fi
echo "check-report: $("$browser" --version 2>/dev/null | tail -n 1)"

# Chromium without a display, a profile of its own and no sandbox (CI runs as root, where the
# sandbox cannot start; the pages are local files without script).
chromium_run() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$work/profile" \
    --enable-logging=stderr --v=0 "$@"
}

# Console messages of loading FILE, one a line (none for a clean page); its DOM into DOM_FILE.
console_of() {  # console_of FILE DOM_FILE LOG_FILE
  chromium_run --dump-dom "file://$1" >"$2" 2>"$3" || fail "chromium could not load $1 (see $3)"
  grep -F ':CONSOLE' "$3" || true
}

# 3. The console check must catch a console message and a load the policy blocks.
cat >"$work/logs.html" <<'EOF'
<!DOCTYPE html><html><body><p>logs</p><script>console.error("an error for the check to catch")</script></body></html>
EOF
cat >"$work/blocked.html" <<'EOF'
<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'"></head>
<body><img src="does-not-load.png" alt=""></body></html>
EOF
for page in logs blocked; do
  [ -n "$(console_of "$work/$page.html" "$work/$page.dom" "$work/$page.log")" ] ||
    fail "the console check missed the messages of a page made to log some ($page.html): it cannot be trusted"
done

# 4. The report loads without a console message.
messages=$(console_of "$report" "$out/report.dom.html" "$out/chromium.log")
if [ -n "$messages" ]; then
  echo "$messages" >&2
  fail "report.html logged to the console (above; all of Chromium's log: $out/chromium.log)"
fi

# 5. What a reader needs, in the rendered DOM.
dom=$out/report.dom.html
missing=()
need() {  # need DESCRIPTION FIXED_STRING
  grep -qF -- "$2" "$dom" || missing+=("$1: $2")
}
for id in recommendation machine driver-calls thread-scaling growth reach trace-replay arena-stats notes files; do
  need "section" "<section id=\"$id\">"
done
need "recommendation in words" "Keep GrowableOptions::max_chunk_bytes at or above"
need "recommendation in words" "One buffer grew to "
if [ -z "$given_report" ]; then
  need "recommendation in words" "One buffer grew to 1 GiB here (reach run)"
  need "host-backend warning" "<p class=\"warning\">Measured on the host backend"
fi
need "machine: CUDA runtime" "<td>CUDA runtime</td>"
need "machine: cuvmm version" "<td>cuvmm</td>"
need "an inline chart" "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\""
need "the Arena's statistics" "<h3>cuvmm_arena</h3>"
need "a link to the JSON" "<a href=\"plan.json\">"
charts=$(grep -o '<svg ' "$dom" | wc -l)
[ "$charts" -ge 5 ] || missing+=("at least 5 charts: found $charts")
if [ ${#missing[@]} -ne 0 ]; then
  printf '  missing %s\n' "${missing[@]}" >&2
  fail "the rendered report lacks what a reader needs (DOM: $dom)"
fi

# 6. The screenshot.
screenshot=$out/report.png
chromium_run --screenshot="$screenshot" --window-size="$width,$height" "file://$report" \
  >"$work/screenshot.out" 2>"$work/screenshot.log" || fail "chromium could not take the screenshot (see $work/screenshot.log)"
python3 - "$screenshot" "$width" "$height" <<'EOF' || fail "the screenshot is not the PNG it should be"
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (int(sys.argv[2]), int(sys.argv[3])), f"{w}x{h}"
assert len(data) > 50000, f"{len(data)} bytes: a blank page?"
EOF
echo "check-report: report.html renders without console messages, with every section, the recommendation and $charts charts"
echo "check-report: screenshot: $screenshot"
