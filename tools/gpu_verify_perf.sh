#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 31, for the lead (removed once its figures are recorded): chapter 01's performance test
# (01.5+speed, driver.py saxpy_performance) graded on the H200 by `make grade-all BACKEND=gpu`.
#
#   on the GPU machine, from the repository root:   bash tools/gpu_verify_perf.sh
#   (about 2 to 3 minutes; logs and the gradebook under $OUT/perf-verify, or build/perf-verify)
#
# Seven submissions of chapter 01, made here from solutions/:
#   solved          the course's solution: expected all of 01.5+speed's 2 points (>= 70% of the copy)
#   slow16..slow128 a correct grid-stride kernel in which only every K-th block works: slower as K
#                   grows; expected points that never rise with K, at least one strictly
#                   between 0 and 2 (partial points), and 01.5 itself still 2/2
#   cheat_skip      its host function launches the kernel once for a large n, then returns at
#                   once (no kernel): 01.5 passes (small sizes), 01.5+speed must be 0
#   cheat_fold      its host function launches one kernel for every two calls (the sum of their
#                   scales): 01.5 passes, 01.5+speed must be 0 (y is wrong, or the figure refused)
# Then `make bench CH=01 BACKEND=gpu` prints the event-timed copy ceiling beside the checker's
# wall-clock one that 01.5+speed divides by: they should agree within 15%.
# Every verdict line starts PASS or FAIL; the figures follow on the lines after them.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG="${OUT:-build}/perf-verify"
mkdir -p "$LOG"
S="$(mktemp -d /tmp/perf-verify.XXXXXX)"
PY="${PYTHON:-python3}"

echo "== the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -n 2 | head -n 1
uptime

echo "== the submissions"
"$PY" - solutions/01_threads_blocks_grids/threads_blocks_grids.cu "$S/subs" <<'EOF'
import re, sys
from pathlib import Path
src, out = Path(sys.argv[1]).read_text(), Path(sys.argv[2])

def region(text, ex, body):
    """text with the lines of `// @solution ex` up to its `// @end` replaced by body."""
    m = re.search(rf"(// @solution {re.escape(ex)}:[^\n]*\n)(.*?)(\s*// @end)", text, re.S)
    assert m, ex
    return text[:m.start(2)] + body + text[m.end(2):]

launch = "    saxpy_grid_stride_kernel<<<blocks, block>>>(a, d_x, d_y, n);\n"
guard = "    if (n == 0)\n        return 0;\n" + launch
assert src.count(guard) == 1
subs = {"solved": src}
for k in (16, 32, 64, 128):
    subs[f"slow{k}"] = region(src, "01.5", f"""    // only one block in {k} works, striding over the working blocks alone
    if (blockIdx.x % {k})
        return;
    size_t stride = (size_t)((gridDim.x + {k - 1}) / {k}) * blockDim.x;
    for (size_t i = (size_t)(blockIdx.x / {k}) * blockDim.x + threadIdx.x; i < (size_t)n;
         i += stride)
        y[i] = a * x[i] + y[i];""")
subs["cheat_skip"] = src.replace(guard, """    static int calls = 0;
    if (n == 0 || (n > (1 << 26) && ++calls > 1))
        return 0;   /* a timing's large n: one launch, then none */
""" + launch)
subs["cheat_fold"] = src.replace(guard, """    static float pending = 0;
    static int calls = 0;
    if (n == 0)
        return 0;
    if (n > (1 << 26)) {   /* a timing's large n: one launch for two calls */
        pending += a;
        if (++calls % 2)
            return 0;
        a = pending;
        pending = 0;
    }
""" + launch)
for name, text in subs.items():
    d = out / name / "chapters" / "01_threads_blocks_grids"
    d.mkdir(parents=True)
    (d / "threads_blocks_grids.cu").write_text(text)
print(" ".join(subs))
EOF

echo "== make grade-all BACKEND=gpu CH=01 (log: $LOG/grade-all.log)"
start=$(date +%s)
timeout 200 make --no-print-directory grade-all SUBMISSIONS="$S/subs" CH=01 BACKEND=gpu JOBS=8 \
    SEED=31 GRADE_OUT="$S/out" > "$LOG/grade-all.log" 2>&1
echo "grade-all: exit $?, $(( $(date +%s) - start )) s"
cp -r "$S/out/gradebook.csv" "$S/out/results" "$LOG/" 2>/dev/null

"$PY" - "$S/out" <<'EOF'
import json, re, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = {}
for f in sorted((out / "results").glob("*/score.json")):
    r = json.loads(f.read_text())
    rows[f.parent.name] = {t["id"]: t for t in r["tests"]}
if not rows:
    print("FAIL: no results at all: see grade-all.log")
    sys.exit(1)

def speed(name):
    t = rows.get(name, {}).get("01.5+speed")
    return t or {"score": None, "max": None, "status": "missing", "message": ""}

def ratio(t):
    m = re.search(r"([\d.]+)% of the device-to-device copy", t["message"])
    return float(m.group(1)) if m else None

def ceiling(t):
    m = re.search(r"copy measured in the same run \((\d+) GB/s\)", t["message"])
    return int(m.group(1)) if m else None

for name in rows:
    t = speed(name)
    print(f"  {name:<11} 01.5 {rows[name].get('01.5', {}).get('score')}/"
          f"{rows[name].get('01.5', {}).get('max')}  01.5+speed {t['score']}/{t['max']} "
          f"{t['status']} in {t.get('seconds')} s: "
          f"{t['message'].splitlines()[0] if t['message'] else ''}")
    for line in t["message"].splitlines()[1:]:
        print(f"              {line}")
ok = True

def verdict(good, text):
    global ok
    ok &= bool(good)
    print(("PASS: " if good else "FAIL: ") + text)

s = speed("solved")
verdict(s["max"] == 2 and s["score"] == 2,
        f"the solution earns all of 01.5+speed: {s['score']}/{s['max']} at {ratio(s)}% of the copy")
slow = [speed(f"slow{k}") for k in (16, 32, 64, 128)]
scores = [t["score"] if t["score"] is not None else -1 for t in slow]
verdict(all(rows[f"slow{k}"].get("01.5", {}).get("score") == 2 for k in (16, 32, 64, 128)),
        "the slow kernels are correct (01.5 2/2 each)")
verdict(all(a >= b for a, b in zip(scores, scores[1:])) and scores[0] <= (s["score"] or 0),
        f"slower kernels never earn more: slow16..slow128 {scores}, "
        f"at {[ratio(t) for t in slow]}% of the copy")
verdict(any(0 < x < 2 for x in scores), f"a slow kernel earns partial points: {scores}")
verdict(not any("refused" in t["message"] for t in [s] + slow),
        "no honest kernel's figure is refused")
for name in ("cheat_skip", "cheat_fold"):
    t = speed(name)
    verdict(rows[name].get("01.5", {}).get("score") == 2 and t["score"] == 0
            and t["status"] == "FAIL",
            f"{name}: 01.5 still passes, 01.5+speed scores {t['score']} ({t['status']})")
cs = [c for c in (ceiling(speed(n)) for n in rows) if c]
print(f"  copy ceilings measured by the checker's clock: {cs} GB/s")
verdict(cs and max(cs) <= 1.15 * min(cs), "the checker's copy ceiling agrees within 15% "
        "across the submissions")
Path(out / "ceilings.txt").write_text(" ".join(map(str, cs)))
sys.exit(0 if ok else 1)
EOF
rc=$?

echo "== make bench CH=01 BACKEND=gpu (log: $LOG/bench.log)"
timeout 120 make --no-print-directory bench CH=01 BACKEND=gpu > "$LOG/bench.log" 2>&1
grep -E "ceiling|saxpy|vector add|01.5" "$LOG/bench.log"
"$PY" - "$LOG/bench.log" "$S/out/ceilings.txt" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"device-to-device cudaMemcpy \(ceiling\)\s+([\d.]+)", text)
w = re.search(r"copy measured in the same run \((\d+) GB/s\)", text)
if not (m and w):
    print("FAIL: the bench printed no event-timed ceiling or no 01.5+speed row")
    sys.exit(1)
event, wall = float(m.group(1)), float(w.group(1))
good = abs(wall - event) <= 0.15 * event
print(("PASS" if good else "FAIL") + f": the checker's wall-clock copy ceiling {wall:.0f} GB/s "
      f"against the event-timed one {event:.0f} GB/s ({wall / event:.1%})")
sys.exit(0 if good else 1)
EOF
rc2=$?
rm -rf "$S"
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && echo "ALL PASS" || echo "SOME FAIL (see above)"
