# SPDX-License-Identifier: MIT
"""Benchmarks: medians of CUDA-event timings, rows with their ratio to a ceiling, recorded runs."""
import json
import os
import statistics
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
