# SPDX-License-Identifier: MIT
"""Benchmarks: medians of CUDA-event timings, rows with their ratio to a ceiling, recorded runs;
and the performance points of a graded exercise (measure_calls, performance_points)."""
import json
import math
import os
import statistics
import time
from pathlib import Path

import numpy as np

from .library import c_float_p
from .paths import build_dir


def plot_gbps(name, sizes, series, xlabel, title, backend):
    """A GB/s-against-size plot, build/plots/<name>.png, where matplotlib is installed (it is
    not a requirement: the table printed beside it is the result). series: {label: [GB/s per
    size]}."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (matplotlib not installed: no plot, the table above is the result)")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, values in series.items():
        ax.plot(sizes, values, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GB/s")
    ax.set_title(f"{title} ({backend} backend"
                 + (": emulator, not a GPU)" if backend == "cpu" else ")"))
    ax.legend()
    ax.grid(True, alpha=0.3)
    out = build_dir() / "plots" / f"{name}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"  plot: {out}")


def median_ms(timed, reps=20):
    """timed(reps, times_ptr) is a C function that warms up and then times `reps` runs with
    CUDA events, one by one. Returns the median in milliseconds (robust to a noisy neighbour)."""
    times = np.zeros(reps, dtype=np.float32)
    timed(reps, times.ctypes.data_as(c_float_p))
    return float(statistics.median(times.tolist()))


class Bench:
    """Prints one row per measurement: the figure, and its ratio to a ceiling measured in the
    same run on the same device."""

    def __init__(self, lib, title):
        self.lib, self.rows, self.title = lib, [], title
        print(f"== {title} ({_device_words(lib)}) ==")
        if lib.backend == "cpu":
            print("NOTE: this is the CPU emulator: the timings below say nothing about a GPU. "
                  "Run --bench on an NVIDIA GPU for real figures.")

    def d2d_copy_gbps(self, nbytes=1 << 30, reps=20):
        """The memory-bound ceiling: device-to-device cudaMemcpy, bytes read + written."""
        ms = median_ms(lambda r, t: self.lib._d2d(nbytes, r, t), reps)
        gbps = 2 * nbytes / (ms * 1e-3) / 1e9
        self.row("device-to-device cudaMemcpy (ceiling)", gbps, "GB/s")
        return gbps

    def row(self, what, value, unit, ceiling=None):
        ratio = f"{value / ceiling:6.1%} of ceiling" if ceiling else ""
        print(f"  {what:<52} {value:10.2f} {unit:<8} {ratio}")
        self.rows.append({"what": what, "value": value, "unit": unit,
                          "ratio": value / ceiling if ceiling else None})
        self._record(self.rows[-1])

    def figure(self, what, value, unit, digits=2):
        """A figure that is not measured against a ceiling (a ratio of two rows, a time):
        printed on a line of its own, and recorded like a row."""
        print(f"  {what}: {value:.{digits}f}{unit if unit in ('x', '%') else ' ' + unit}")
        self.rows.append({"what": what, "value": value, "unit": unit, "ratio": None})
        self._record(self.rows[-1])

    def add(self, what, value, unit, ratio=None):
        """A figure the caller prints itself (a cell of a table): kept and recorded like a row."""
        self.rows.append({"what": what, "value": value, "unit": unit, "ratio": ratio})
        self._record(self.rows[-1])

    def _record(self, row):
        """With TUT_RECORD=FILE (make bench RECORD=1), append the figure to FILE, a JSON run
        that tools/figures.py merges into the committed record (docs/figures/)."""
        path = os.environ.get("TUT_RECORD")
        if not path:
            return
        path = Path(path)
        run = json.loads(path.read_text()) if path.exists() else {
            "backend": self.lib.backend, "figures": []}
        run["figures"].append({"chapter": self.title[:2], "what": row["what"],
                               "value": round(float(row["value"]), 4), "unit": row["unit"],
                               "ratio": None if row["ratio"] is None
                               else round(float(row["ratio"]), 5)})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run, indent=1))


def _device_words(lib):
    if lib.backend == "cpu":
        return "cpu backend: emulator"
    return f"gpu backend, {lib.device_count()} device(s)"


# ---- performance points ---------------------------------------------------------------------
# A performance test (Chapter.performance) earns a fraction of its points from a figure's ratio
# to the copy ceiling measured in the same run. Both are timed here, by the checker (the process
# that decides the grade), with its own clock around calls of the student's library: nothing
# the library computes (a CUDA event it records, a time it returns) enters the figure.

# Above this multiple of the copy ceiling a figure is refused (0 points). The H200's theoretical
# DRAM bandwidth, 4814 GB/s (clock x bus width), is 1.14x the device-to-device copy chapter 01
# measured there (4234 GB/s), and the fastest kernel recorded there, chapter 04's read-only
# reduction, 1.04x its copy (docs/figures/h200.json): an honest figure past 1.25x means work
# was skipped, or the clock was fooled.
REFUSE_ABOVE = 1.25

# Written before each timed run: past the L2 of every GPU the course runs on (60 MiB on the H200,
# chapter 10), so that no run finds the previous one's data in cache.
FLUSH_BYTES = 256 << 20


def points_fraction(ratio, full, zero):
    """The fraction of a performance test's points for a figure at `ratio` of the ceiling: none
    at or below `zero`, all at or above `full`, linear between (the instructor's scale)."""
    if not 0 <= zero < full:
        raise ValueError(f"a performance scale needs 0 <= zero < full (got zero={zero}, "
                         f"full={full})")
    if not math.isfinite(ratio) or ratio <= zero:
        return 0.0
    return 1.0 if ratio >= full else (ratio - zero) / (full - zero)


def performance_points(what, gbps, ceiling_gbps, full, zero, refuse_above=REFUSE_ABOVE):
    """(fraction of the points, the sentence that says why) for a figure of `gbps` against the
    copy ceiling of the same run. A figure the hardware cannot reach is refused: AssertionError
    (the test fails, 0 points)."""
    if not (math.isfinite(ceiling_gbps) and ceiling_gbps > 0):
        raise AssertionError(f"{what}: the copy ceiling measured {ceiling_gbps} GB/s: no figure "
                             f"can be judged against it")
    ratio = gbps / ceiling_gbps
    if not math.isfinite(ratio) or ratio > refuse_above:
        raise AssertionError(
            f"{what}: {_gbps(gbps)} GB/s is {ratio:.0%} of the device-to-device copy measured in "
            f"the same run ({_gbps(ceiling_gbps)} GB/s), more than this GPU's memory can move "
            f"(refused above {refuse_above:.0%}): the figure is refused and scores 0. A kernel "
            f"that skips part of its work, or returns before it is done, measures like this.")
    frac = points_fraction(ratio, full, zero)
    return frac, (f"{what}: {_gbps(gbps)} GB/s, {ratio:.1%} of the device-to-device copy "
                  f"measured in the same run ({_gbps(ceiling_gbps)} GB/s): {frac:.0%} of the "
                  f"points (all from {full:.0%} of the copy, none at {zero:.0%} or below)")


def _gbps(value):
    """A GPU's hundreds or thousands of GB/s in whole numbers; the emulator's fractions too."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def measure_calls(contenders, sync, flush, runs=7, min_seconds=0.02, max_reps=200,
                  clock=time.perf_counter, extra=None, after_run=None, too_slow=None):
    """Seconds per call of each contender, {name: seconds}, timed by the caller's clock.

    contenders: [(name, call)], each call() one unit of work that may return before the device
    is done. A calibration call each sets the calls per run (reps: enough for min_seconds, so
    that the clock's resolution and the per-call overhead stay small); then a warm-up run of each,
    not counted, and `runs` timed runs, the contenders interleaved run by run (a noisy neighbour
    slows them alike). Before every run flush() evicts the L2 and sync() waits for it; a run's
    time ends after sync() (the device is done with every call, however early they returned);
    the figure is the median run over its calls. sync and flush are the harness's, not the
    student's. extra(), if given, adds calls to each run (0 to 2, drawn by the caller), so that
    a library counting its calls cannot tell where a run ends; after_run(name), if given, runs
    after each run, outside the clock: a check that the run's work is all done. too_slow: the
    seconds past which one calibration call fails the measurement (AssertionError) instead of
    running on for (runs + 1) x 3 more calls, past the test's time limit.
    Returns ({name: seconds per call}, {name: calls per run before extra()}).
    """
    if runs < 5:
        raise ValueError(f"runs={runs}: a median needs at least 5 timed runs")
    reps = {}
    for name, call in contenders:
        flush()
        sync()
        t0 = clock()
        call()
        sync()
        once = clock() - t0
        if too_slow is not None and once > too_slow:
            raise AssertionError(f"{name}: one call took {once:.2f} s, more than the {too_slow} s "
                                 f"a call may take here: not timed further (its runs would "
                                 f"outlast the test's time limit), 0 points")
        reps[name] = max(3, min(max_reps, math.ceil(min_seconds / once) if once > 0
                                else max_reps))
    times = {name: [] for name, _ in contenders}
    for run in range(runs + 1):   # run 0: the warm-up
        for name, call in contenders:
            calls = reps[name] + (extra() if extra else 0)
            flush()
            sync()
            t0 = clock()
            for _ in range(calls):
                call()
            sync()
            elapsed = clock() - t0
            if after_run:
                after_run(name)
            if run:
                times[name].append(elapsed / calls)
    return {name: statistics.median(t) for name, t in times.items()}, reps
