#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test twice: a Release build,
# then an AddressSanitizer + UndefinedBehaviorSanitizer build. Fails on any
# failure. This is the README's test command and what .ci/run executes.
#
#   scripts/test.sh              every test once in each build
#   scripts/test.sh --repeat N   stress mode: each test up to N times in each
#                                build, stopping at its first failure
#                                (ctest --repeat until-fail:N); run it on a
#                                loaded machine to find tests that can fail
#                                without a bug
set -euo pipefail
repeat=()
case "${1:-}" in
"") ;;
--repeat)
  [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/test.sh [--repeat N]" >&2; exit 2; }
  repeat=(--repeat "until-fail:$2")
  ;;
*) echo "usage: scripts/test.sh [--repeat N]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/web-deps.sh

jobs=$(nproc)
run_suite() { # name, build dir, extra cmake args...
  local name=$1 dir=$2
  shift 2
  echo "=== ${name}: configure + build (${dir}) ==="
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "=== ${name}: tests ==="
  if ! (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 1800 "${repeat[@]}"); then
    failure_digest "$name" "$dir"
    return 1
  fi
}

# A failing test's full output sits mid-log, where a CI excerpt cuts it; this
# repeats, for each failing test, the lines that say why (test framework
# verdicts, sanitizer reports, assertion messages, or else the output's last
# lines) at the very end.
failure_digest() { # name, build dir
  local log="$2/Testing/Temporary/LastTest.log" failed="$2/Testing/Temporary/LastTestsFailed.log"
  [ -f "$log" ] && [ -f "$failed" ] || return 0
  echo "=== ${1}: why the failing tests failed (from ${log}) ==="
  local name out why
  while IFS=: read -r _ name; do
    out=$(awk -v t="$name" '$0 ~ "^[0-9]+/[0-9]+ Test: " {on = ($3 == t); next}
                            on && /^<end of output>$/ {on = 0} on' "$log" |
      grep -v -E '"level":"(info|debug)"' || true)
    why=$(grep -E -B4 -A8 '^\[  (ERROR|FAILED) +\]|ERROR: [A-Za-z]+Sanitizer|runtime error:|Assertion|Traceback' <<<"$out" || true)
    echo "--- ${name}"
    if [ -n "$why" ]; then tail -n 60 <<<"$why"; else tail -n 30 <<<"$out"; fi
  done <"$failed"
}

run_suite release build -DCMAKE_BUILD_TYPE=Release -DFPS_SANITIZE=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suite sanitizers build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFPS_SANITIZE=ON
echo "=== all suites passed ==="
