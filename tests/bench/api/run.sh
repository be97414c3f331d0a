#!/usr/bin/env bash
# Admin API benchmark; see README.md. Usage: tests/bench/api/run.sh [BUILD_DIR]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${1:-$SRC/build}
RUNS=${RUNS:-100000}
WORK=$(mktemp -d /tmp/fps-api-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -I"$SRC" -D_GNU_SOURCE -DFPS_VERSION='"bench"' "$SRC/tests/bench/api/seed_store.c" \
  "$BUILD/store/libfps_store.a" "$BUILD/common/libfps_common.a" \
  -lsqlite3 -ljansson -lcrypto -luuid -lpthread -lm -o "$WORK/seed_store"
if [ -n "${SEED_DB:-}" ] && [ -f "$SEED_DB" ]; then
  echo "copying the seeded database $SEED_DB ..."
  cp "$SEED_DB" "$WORK/bench.db"
else
  echo "seeding $RUNS runs (about a minute) ..."
  "$WORK/seed_store" "$WORK/bench.db" "$RUNS" 2>/dev/null
  if [ -n "${SEED_DB:-}" ]; then cp "$WORK/bench.db" "$SEED_DB"; fi
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$SRC/tests/bench/api/bench.py" "$BUILD/failproofai-sidecar" "$WORK/bench.db" \
  --conns "${CONNS:-32}" --duration "${DURATION:-10s}" --sessions "${SESSIONS:-300}" --repeat "${REPEAT:-3}" --rate "${RATE:-2200}" \
  ${API_ONLY:+--api-only} ${SKIP_FLAT:+--skip-flat}
