#!/usr/bin/env bash
# tests/format_check: every first-party C file is as clang-format (the root
# .clang-format) would write it. Generated tables opt out with a
# "clang-format off" comment, which their generators emit. Prints the files
# that differ and fails; `clang-format -i FILE` fixes one.
set -euo pipefail
root=${1:?usage: format_check.sh ROOT}
cd "$root"
mapfile -t files < <(find api common emulator sandbox sidecar store web tests -name node_modules -prune \
  -o \( -name '*.c' -o -name '*.h' \) -type f -print | sort)
[ "${#files[@]}" -gt 0 ] || { echo "format_check: no C files under $root" >&2; exit 1; }
bad=$(clang-format --dry-run "${files[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: .*/\1/p' | sort -u)
if [ -n "$bad" ]; then
  echo "format_check: not clang-formatted:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "format_check: ${#files[@]} files clang-formatted"
