#!/usr/bin/env bash
# Runs clang-tidy (root .clang-tidy, Debian clang-tidy 14) over every
# first-party .c file that the build compiles, one file at a time (slow: a few
# seconds to tens of seconds per file). Exits non-zero if any file has a
# warning or error. For developers; not part of scripts/test.sh.
# Usage: scripts/tidy.sh [build dir, default build] [file...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift
if [ ! -f "$build/compile_commands.json" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
  cmake --build "$build" -j2 >/dev/null # generated headers/sources must exist
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  # tracked .c files that are in the compile database (bench programs are not)
  mapfile -t files < <(python3 - "$build/compile_commands.json" <<'PY'
import json, os, subprocess, sys
db = {os.path.realpath(e["file"]) for e in json.load(open(sys.argv[1]))}
out = subprocess.run(["git", "ls-files", "*.c"], capture_output=True, text=True, check=True)
for f in out.stdout.split():
    if os.path.realpath(f) in db:
        print(f)
PY
  )
fi
bad=0
for f in "${files[@]}"; do
  out=$(clang-tidy -p "$build" --quiet "$f" 2>/dev/null) || true
  if grep -qE '(warning|error):' <<<"$out"; then
    printf '%s\n' "$out"
    bad=$((bad + 1))
  fi
done
echo "clang-tidy: ${#files[@]} files, $bad with findings"
[ "$bad" -eq 0 ]
