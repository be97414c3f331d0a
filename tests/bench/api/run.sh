#!/usr/bin/env bash
# Admin API benchmark (issue 8): with 100,000 runs in the store,
# GET /v1/runs?limit=100 under load from wrk. Prints p50/p99 latency and
# requests/s next to the targets (p99 <= 20 ms, >= 2,000 req/s) as ratios.
# Not a test (no thresholds enforced). Usage: tests/bench/api/run.sh [BUILD_DIR]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${1:-$SRC/build}
BIN=$BUILD/failproofai-sidecar
RUNS=${RUNS:-100000}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
WORK=$(mktemp -d /tmp/fps-api-bench.XXXXXX)
trap 'kill $SC_PID 2>/dev/null || true; wait $SC_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT

cc -O2 -I"$SRC" -D_GNU_SOURCE -DFPS_VERSION='"bench"' "$SRC/tests/bench/api/seed_store.c" \
  "$BUILD/store/libfps_store.a" "$BUILD/common/libfps_common.a" \
  -lsqlite3 -ljansson -lcrypto -luuid -lpthread -lm -o "$WORK/seed_store"
echo "seeding $RUNS runs ..."
"$WORK/seed_store" "$WORK/bench.db" "$RUNS" 2>/dev/null

# The worker points at a closed port: it stays up (not ready); the admin API
# and the store's read connections are what is measured.
DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
FAILPROOFAI_EVALUATOR_TOKEN=bench "$BIN" run --server "http://127.0.0.1:$DEAD" \
  --listen 127.0.0.1:0 --db "$WORK/bench.db" --log-level info 2> "$WORK/sidecar.log" &
SC_PID=$!
PORT=""
for _ in $(seq 100); do
  PORT=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: r=json.loads(l)
    except ValueError: continue
    if r.get("msg")=="admin API listening" and "port" in r: print(r["port"]); break' "$WORK/sidecar.log")
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { echo "sidecar did not start"; cat "$WORK/sidecar.log"; exit 1; }
URL="http://127.0.0.1:$PORT/v1/runs?limit=100"
COUNT=$(curl -fsS "$URL" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["runs"]))')
echo "GET /v1/runs?limit=100 returns $COUNT runs; warming up ..."
wrk -t2 -c"$CONNS" -d2s "$URL" > /dev/null
wrk -t2 -c"$CONNS" -d"$DURATION" --latency "$URL" | tee "$WORK/wrk.txt"
# also a filtered page further down (keyset cursor)
CURSOR=$(curl -fsS "$URL&status=succeeded" | python3 -c 'import json,sys; print(json.load(sys.stdin)["next_cursor"])')
wrk -t2 -c"$CONNS" -d"$DURATION" --latency "$URL&status=succeeded&cursor=$CURSOR" > "$WORK/wrk2.txt"

python3 - "$WORK/wrk.txt" "$WORK/wrk2.txt" <<'PY'
import re, sys
def parse(path):
    t = open(path).read()
    def ms(label):
        m = re.search(r"^\s*%s\s+([\d.]+)(us|ms|s)" % re.escape(label), t, re.M)
        v, u = float(m.group(1)), m.group(2)
        return v / 1000 if u == "us" else v * 1000 if u == "s" else v
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
    return ms("50%"), ms("99%"), rps, int(errs.group(1)) if errs else 0
for name, path in (("first page", sys.argv[1]), ("filtered page via cursor", sys.argv[2])):
    p50, p99, rps, errs = parse(path)
    print(f"{name:26s} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms (target <= 20 ms: ratio {p99/20:.2f})"
          f"  {rps:9.0f} req/s (target >= 2000: ratio {rps/2000:.2f})  non-2xx {errs}")
PY
