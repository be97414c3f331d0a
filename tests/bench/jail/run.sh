#!/usr/bin/env bash
# tests/bench/jail/run.sh: end-to-end managed evaluation latency through the
# jail vs the reference SDK's approach (anchor.py: a fresh python3 per
# evaluation), on the contract's sample transcript and on a generated ~7 MB
# one, plus posix_spawn of /bin/true as the floor. Prints figures side by side
# with ratios. Not a test (no thresholds).
# usage: run.sh [BUILD_DIR] [capacity]
#   capacity: only the machine's jail capacity (evaluations/s with 1 and 2
#   streams sharing one pool, a trivial expression, nothing else running)
#   next to posix_spawn of /bin/true from as many streams; the last line is
#   `capacity-json: {...}` (read by tests/bench/worker/bench_worker.py),
#   after `batched_assignments_per_s <n>`: sessions of 3 evaluations (one
#   evaluator each, as an assignment with three managed definitions) per second.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

libs=""
for d in sidecar api emulator store web sandbox/jail sandbox/lang common; do
  for a in "$build/$d"/lib*.a; do [ -e "$a" ] && libs="$libs $a"; done
done
cc -O2 -D_GNU_SOURCE -I"$root" "$here/bench_jail.c" -o "$work/bench_jail" \
  -Wl,--start-group $libs -Wl,--end-group \
  $(pkg-config --libs libcurl libmicrohttpd jansson sqlite3 libseccomp libutf8proc uuid nettle) \
  -lgmp -lm -lpthread

/usr/bin/python3 - "$work/small.json" "${FPS_CONTRACT:-$root/tests/fixtures/evaluator-v2.json}" <<'PY'
import json, sys
c = json.load(open(sys.argv[2]))
json.dump(c["samples"]["transcript_response"], open(sys.argv[1], "w"))
PY

bin="$build/failproofai-sidecar"
if [ "${2:-}" = capacity ]; then
  cn=${CAPACITY_N:-600}
  trivial='EvalResult(metrics={"q": Metric(1)})'
  c1=$("$work/bench_jail" "$bin" "$work/small.json" "$cn" "$trivial" --streams 1 2>/dev/null)
  c2=$("$work/bench_jail" "$bin" "$work/small.json" "$cn" "$trivial" --streams 2 2>/dev/null)
  e2=$("$work/bench_jail" "$bin" "$work/small.json" "$cn" "$trivial" --streams 2 --test-mode echo 2>/dev/null)
  b1=$("$work/bench_jail" "$bin" "$work/small.json" "$cn" "$trivial" --streams 1 --batch 3 2>/dev/null)
  b2=$("$work/bench_jail" "$bin" "$work/small.json" "$cn" "$trivial" --streams 2 --batch 3 2>/dev/null)
  /usr/bin/python3 - "$c1" "$c2" "$e2" "$b1" "$b2" <<'PY'
import json, sys
c1, c2, e2, b1, b2 = (json.loads(x) for x in sys.argv[1:])
print("jail capacity (the contract sample, back to back, streams share one pool)")
for what, c in (("trivial evaluator", c1), ("trivial evaluator", c2), ("no interpreter (echo)", e2)):
    print(f"  {what:22s} {c['streams']} stream(s): {c['evals_per_s']:7.1f} evaluations/s   "
          f"posix_spawn of /bin/true from {c['streams']} stream(s): {c['floor_per_s']:7.1f}/s   "
          f"failures {c['failures']}")
for c in (b1, b2):
    print(f"  {'sessions of 3':22s} {c['streams']} stream(s): {c['evals_per_s']:7.1f} evaluations/s = "
          f"{c['sessions_per_s']:7.1f} assignments/s   failures {c['failures']}")
batched = max(b1["sessions_per_s"], b2["sessions_per_s"])
print(f"batched_assignments_per_s {batched:.1f}")
print("capacity-json: " + json.dumps({"evals_per_s": max(c1["evals_per_s"], c2["evals_per_s"]),
                                      "echo_per_s": e2["evals_per_s"],
                                      "spawn_per_s": max(c1["floor_per_s"], c2["floor_per_s"]),
                                      "batched_assignments_per_s": batched,
                                      "failures": c1["failures"] + c2["failures"] + e2["failures"]
                                      + b1["failures"] + b2["failures"]}))
PY
  exit 0
fi
/usr/bin/python3 "$here/gen_transcript.py" "$work/big.json" 20000

expr='EvalResult(score=Score(min(1.0, session.count("tool_use") / max(1, session.event_count))), summary=str(session.event_count))'
jn=${JAIL_N:-300}
an=${ANCHOR_N:-20}

# An evaluation that walks every payload (the session image read whole), and
# sessions of 3 as well as 6, for the batched figures.
walk='len([e for e in session.events if "refund" in str(e.payload)])'
wn=${WALK_N:-60}
declare -A J A B
for t in small big; do
  J[$t]=$("$work/bench_jail" "$bin" "$work/$t.json" "$jn" "$expr" 2>/dev/null)
  B[$t]=$("$work/bench_jail" "$bin" "$work/$t.json" "$jn" "$expr" --batch 6 2>/dev/null)
  B[$t.3]=$("$work/bench_jail" "$bin" "$work/$t.json" "$jn" "$expr" --batch 3 2>/dev/null)
  A[$t]=$(/usr/bin/python3 "$here/anchor.py" "$work/$t.json" "$an" "$expr")
done
walk1=$("$work/bench_jail" "$bin" "$work/big.json" "$wn" "$walk" 2>/dev/null)
walk6=$("$work/bench_jail" "$bin" "$work/big.json" "$wn" "$walk" --batch 6 2>/dev/null)
paced=$("$work/bench_jail" "$bin" "$work/small.json" 100 "$expr" --pace-ms 20 2>/dev/null)
pacedb=$("$work/bench_jail" "$bin" "$work/big.json" 50 "$expr" --pace-ms 40 2>/dev/null)
cold=$("$work/bench_jail" "$bin" "$work/small.json" "$jn" "$expr" --no-prestart 2>/dev/null)
exec1=$("$work/bench_jail" "$bin" "$work/small.json" "$jn" "$expr" --no-prestart --no-zygote 2>/dev/null)
nons=$("$work/bench_jail" "$bin" "$work/small.json" "$jn" "$expr" --no-ns 2>/dev/null)

/usr/bin/python3 - "$(stat -c %s "$work/big.json")" "${J[small]}" "${A[small]}" "${J[big]}" "${A[big]}" "$paced" "$pacedb" "$cold" "$exec1" "$nons" "${B[small]}" "${B[big]}" "${B[small.3]}" "${B[big.3]}" "$walk1" "$walk6" <<'PY'
import json, sys
size = int(sys.argv[1])
(js, as_, jb, ab, paced, pacedb, cold, exec1, nons, bs, bb, bs3, bb3, w1, w6) = (
    json.loads(x) for x in sys.argv[2:])
print("per-evaluation cost, batched (sessions of B: one evaluator each, serving them in turn) vs "
      "unbatched (sbx_eval: a child each), back to back; ms = wall / evaluations, CPU = sidecar + "
      "children per evaluation")
print(f"{'transcript':<30}{'B':>3}{'unbatched ms':>13}{'batched ms':>12}{'ratio':>7}{'unbatched CPU':>15}"
      f"{'batched CPU':>13}{'ratio':>7}")
mb = f"{size/1e6:.1f} MB"
for name, u, b in (("contract sample", js, bs), ("contract sample", js, bs3),
                   (f"generated {mb}", jb, bb), (f"generated {mb}", jb, bb3),
                   (f"generated {mb}, payload walk", w1, w6)):
    uw, bw = 1e3 / u["evals_per_s"], 1e3 / b["evals_per_s"]
    print(f"{name:<30}{b['batch']:>3}{uw:>13.3f}{bw:>12.3f}{bw/uw:>7.2f}{u['cpu_ms']:>15.3f}"
          f"{b['cpu_ms']:>13.3f}{b['cpu_ms']/u['cpu_ms']:>7.2f}")
print(f"managed evaluation latency, jail (sbx_eval, back to back) vs anchor (fresh python3 per evaluation)")
print(f"{'transcript':<22}{'jail p50':>10}{'jail p99':>10}{'anchor p50':>12}{'anchor p99':>12}{'x p50':>8}{'x p99':>8}")
for name, j, a in (("contract sample", js, as_), (f"generated {size/1e6:.1f} MB", jb, ab)):
    print(f"{name:<22}{j['p50_ms']:>10.2f}{j['p99_ms']:>10.2f}{a['p50_ms']:>12.1f}{a['p99_ms']:>12.1f}"
          f"{a['p50_ms']/j['p50_ms']:>8.0f}{a['p99_ms']/j['p99_ms']:>8.0f}")
print(f"  (7 MB image built once per assignment: {jb['image_ms']:.1f} ms; JSON load {jb['load_ms']:.1f} ms)")
print(f"jail, paced (one evaluation at a time, a pre-started child ready), vs the same anchor")
for name, j, a, gap in (("contract sample", paced, as_, 20), (f"generated {size/1e6:.1f} MB", pacedb, ab, 40)):
    print(f"{name:<22}{j['p50_ms']:>10.2f}{j['p99_ms']:>10.2f}{a['p50_ms']:>12.1f}{a['p99_ms']:>12.1f}"
          f"{a['p50_ms']/j['p50_ms']:>8.0f}{a['p99_ms']/j['p99_ms']:>8.0f}   ({gap} ms apart)")
print(f"spawn floor: posix_spawn+wait of /bin/true p50 {js['floor_p50_ms']:.2f} ms (CPU {js['floor_cpu_ms']:.2f} ms)")
print(f"jail without pre-start (child forked by the zygote on demand) p50 {cold['p50_ms']:.2f} ms = {cold['p50_ms']/cold['floor_p50_ms']:.2f}x its floor "
      f"({cold['floor_p50_ms']:.2f} ms); CPU per evaluation {cold['cpu_ms']:.2f} ms = {cold['cpu_ms']/cold['floor_cpu_ms']:.2f}x")
print(f"jail without pre-start or zygote (child exec'd on demand) p50 {exec1['p50_ms']:.2f} ms = {exec1['p50_ms']/exec1['floor_p50_ms']:.2f}x its floor "
      f"({exec1['floor_p50_ms']:.2f} ms); CPU per evaluation {exec1['cpu_ms']:.2f} ms = {exec1['cpu_ms']/exec1['floor_cpu_ms']:.2f}x")
print(f"jail with pre-start p50 {js['p50_ms']:.2f} ms = {js['p50_ms']/js['floor_p50_ms']:.2f}x the floor; "
      f"CPU per evaluation {js['cpu_ms']:.2f} ms")
print(f"without namespaces: p50 {nons['p50_ms']:.2f} ms, CPU {nons['cpu_ms']:.2f} ms per evaluation")
print("failures:", js["failures"], jb["failures"], bs["failures"], bb["failures"], bs3["failures"],
      bb3["failures"], w1["failures"], w6["failures"], paced["failures"], pacedb["failures"], cold["failures"], exec1["failures"], nons["failures"],
      "| last outcome:", json.dumps(js["last"])[:100])
PY
