# SPDX-License-Identifier: MIT
"""The lessons' pictures, drawn as SVG by hand (Python standard library only): `make pictures`.

    python3 tools/pictures.py            write every picture into docs/img/
    python3 tools/pictures.py --check    exit 1 if a committed picture is not what the script draws

Pictures that show data read it from the record (docs/figures/*.json), never from numbers
written here: the memory hierarchy's and managed memory's bandwidths, chapter 03's stream
timeline (from the event timestamps `--bench` writes to build/figures/03_timeline.json on a
GPU), and chapter 07's arena (from what the demo's tpool did, build/figures/07_arena.json, on
the solutions, any backend).
"""
import argparse
import json
import sys
from pathlib import Path

from figures import query  # tools/ is this script's folder

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "img"
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac"]


class Svg:
    def __init__(self, width, height):
        self.w, self.h, self.items = width, height, []

    def rect(self, x, y, w, h, fill="#fff", stroke="#333", sw=1, rx=0, opacity=1.0):
        self.items.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                          f'rx="{rx}" fill="{fill}" stroke="{stroke}" stroke-width="{sw}" '
                          f'fill-opacity="{opacity}"/>')

    def line(self, x1, y1, x2, y2, stroke="#333", sw=1, arrow=False, dash=""):
        extra = ' marker-end="url(#arrow)"' if arrow else ""
        extra += f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                          f'stroke="{stroke}" stroke-width="{sw}"{extra}/>')

    def text(self, x, y, s, size=12, anchor="middle", weight="normal", fill="#222"):
        s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        self.items.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" {FONT} '
                          f'text-anchor="{anchor}" font-weight="{weight}" fill="{fill}">{s}'
                          f'</text>')

    def render(self):
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                f'viewBox="0 0 {self.w} {self.h}">\n<defs><marker id="arrow" markerWidth="8" '
                f'markerHeight="8" refX="7" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" '
                f'fill="#333"/></marker></defs>\n<rect width="100%" height="100%" fill="#fff"/>')
        return head + "\n" + "\n".join(self.items) + "\n</svg>\n"


# ---- the record ---------------------------------------------------------------------------------
def recorded(chapters, what_starts, unit):
    """(value, run id) of the last recorded run's figure from one of `chapters` ("00 04"), or
    None when no run has it."""
    best = None
    for path in sorted((REPO / "docs" / "figures").glob("*.json")):
        for run in json.loads(path.read_text()).get("runs", []):
            for f in run.get("figures", []):
                if (f["chapter"] in chapters.split() and f["what"].startswith(what_starts)
                        and f["unit"] == unit and isinstance(f.get("value"), (int, float))):
                    best = (f["value"], f"{run.get('device', '')}, {run.get('date', '')}")
    return best


def fmt(fig, unit):
    return f"{fig[0]:g} {unit}" if fig else "(not recorded)"


# ---- 01: grid, blocks, warps --------------------------------------------------------------------
def hierarchy():
    s = Svg(760, 330)
    s.text(380, 24, "kernel<<<dim3(3, 2), 128>>>: a grid of 3 x 2 blocks of 128 threads",
           14, weight="bold")
    for by in range(2):
        for bx in range(3):
            x, y = 30 + bx * 95, 50 + by * 75
            hl = (bx, by) == (1, 1)
            s.rect(x, y, 85, 65, fill="#dbe7f3" if hl else "#f4f4f4", rx=4, sw=2 if hl else 1)
            s.text(x + 42, y + 37, f"block ({bx},{by})", 11)
    s.text(172, 220, "blockIdx = (1,1): the block", 11)
    s.text(172, 236, "picked out on the right", 11)
    s.line(305, 135, 345, 135, arrow=True)
    s.rect(350, 45, 390, 200, fill="#dbe7f3", rx=6, sw=2)
    s.text(545, 65, "one block: 128 threads = 4 warps of 32, on one SM", 12, weight="bold")
    for w in range(4):
        y = 78 + w * 40
        s.text(362, y + 20, f"warp {w}", 11, anchor="start")
        for lane in range(32):
            s.rect(415 + lane * 9.6, y + 6, 8.6, 20, fill=PALETTE[w], stroke="#fff")
        s.text(415, y + 38, f"threadIdx.x {32 * w}", 9, anchor="start")
        s.text(722, y + 38, f"{32 * w + 31}", 9, anchor="end")
    s.text(380, 280, "i = blockIdx.x * blockDim.x + threadIdx.x  (in 64 bits when n may pass "
                     "2^31 - 1)", 12)
    s.text(380, 302, "The SM issues one instruction for a warp (SIMT); blocks run in any order "
                     "and cannot wait for each other.", 11)
    return s


# ---- the memory hierarchy, with the record's bandwidths -----------------------------------------
def memory():
    d2d = recorded("01", "device-to-device cudaMemcpy", "GB/s")
    optin = recorded("00 04", "shared memory per block, opt-in", "KiB")
    l2 = recorded("00", "L2 cache", "MiB")
    gmem = recorded("00", "global memory", "GiB")
    h2d = recorded("03", "H2D pinned", "GB/s")
    pageable = recorded("03", "H2D pageable", "GB/s")
    s = Svg(760, 400)
    s.text(380, 24, "Where the data lives (bandwidths measured on the H200, from the record)",
           14, weight="bold")
    levels = [
        ("registers", "per thread; the fastest; spill to local memory when too many", "#59a14f"),
        ("shared memory / L1", f"per block, on its SM: 48 KiB by default, up to "
                               f"{fmt(optin, 'KiB')} opt-in (ch04)", "#76b7b2"),
        ("L2 cache", "shared by every SM" + (f": {fmt(l2, 'MiB')}" if l2 else ""),
         "#edc948"),
        ("global memory (HBM)", (f"{fmt(gmem, 'GiB')}; " if gmem else "every kernel; ")
         + f"a device-to-device copy moves {fmt(d2d, 'GB/s')} (read + write, ch01)",
         "#4e79a7"),
        ("host memory, over PCIe", f"copy engines: {fmt(h2d, 'GB/s')} pinned, "
                                   f"{fmt(pageable, 'GB/s')} pageable (ch03)", "#e15759"),
    ]
    for i, (name, what, color) in enumerate(levels):
        y = 50 + i * 66
        width = 460 + i * 60
        x = 380 - width / 2
        s.rect(x, y, width, 52, fill=color, opacity=0.35, rx=6)
        s.text(380, y + 22, name, 13, weight="bold")
        s.text(380, y + 40, what, 11)
    s.text(380, 388, "Up the pyramid: smaller, closer to the threads, faster. Every chapter is "
                     "about moving data up it, and back, as little as possible.", 11)
    return s


# ---- 04: the tiled matmul's data flow -----------------------------------------------------------
def matmul():
    s = Svg(760, 420)
    s.text(380, 24, "Tiled C = A B: a block computes one 32 x 32 tile of C", 14, weight="bold")
    # B on top, A on the left, C below B: each square is one 32 x 32 tile
    t = 30
    bx, by = 230, 60
    ax, ay = 40, by + 4 * t + 30
    cx, cy = bx, ay
    for (ox, oy, name, above) in ((ax, ay, "A (m x k)", False), (bx, by, "B (k x n)", True),
                                  (cx, cy, "C (m x n)", False)):
        for r in range(4):
            for c in range(4):
                s.rect(ox + c * t, oy + r * t, t, t, fill="#f4f4f4")
        s.text(ox + 2 * t, oy - 8 if above else oy + 4 * t + 18, name, 12)
    for c in range(4):
        s.rect(ax + c * t, ay + 2 * t, t, t, fill=PALETTE[c], opacity=0.6)
        s.rect(bx + 1 * t, by + c * t, t, t, fill=PALETTE[c], opacity=0.6)
    s.rect(cx + t, cy + 2 * t, t, t, fill="#333", opacity=0.8)
    s.text(cx + 1.5 * t, cy + 2.6 * t, "C", 11, fill="#fff", weight="bold")
    # shared memory
    s.rect(410, 120, 330, 190, fill="#dbe7f3", rx=6, sw=2)
    s.text(575, 140, "shared memory of the block", 12, weight="bold")
    s.rect(440, 160, 90, 90, fill=PALETTE[1], opacity=0.6)
    s.text(485, 210, "As", 13, weight="bold")
    s.rect(620, 160, 90, 90, fill=PALETTE[1], opacity=0.6)
    s.text(665, 210, "Bs", 13, weight="bold")
    s.text(575, 275, "step k0: the 1024 threads load one element", 10)
    s.text(575, 289, "of each tile, __syncthreads(), 32 FMAs each", 10)
    s.text(575, 303, "from shared memory, __syncthreads(), next k0", 10)
    s.line(ax + 4 * t, ay + 2.5 * t, cx - 4, ay + 2.5 * t, stroke="#999", dash="2,3")
    s.line(bx + 2 * t, by + 1.5 * t, 620, 200, arrow=True, dash="4,3")
    s.line(ax + 2 * t, ay + 2 * t, 440, 230, arrow=True, dash="4,3")
    s.text(380, 388, "Each element of A and B is read from global memory once per tile instead "
                     "of once per product:", 11)
    s.text(380, 404, "32 FMAs per global load. Register tiles (v3) go further: 16 shared loads "
                     "feed 64 FMAs.", 11)
    return s


# ---- 04: the reduction tree ---------------------------------------------------------------------
def reduction():
    s = Svg(860, 330)
    s.text(430, 24, "Tree reduction in shared memory: halve the active threads each step",
           14, weight="bold")
    n, w = 16, 36
    x0 = 20
    level, y = n, 50
    while level >= 1:
        for i in range(level):
            active = i < level
            s.rect(x0 + i * w + 2, y, w - 4, 28, fill=PALETTE[4] if active else "#eee", rx=3)
            s.text(x0 + i * w + w / 2, y + 18, f"s[{i}]", 10)
        if level > 1:
            half = level // 2
            for i in range(half):
                s.line(x0 + (i + half) * w + w / 2, y + 28, x0 + i * w + w / 2 + 4, y + 58,
                       stroke="#bbb", arrow=True)
                s.line(x0 + i * w + w / 2, y + 28, x0 + i * w + w / 2, y + 58,
                       stroke="#333", arrow=True)
            s.text(x0 + n * w + 8, y + 48, f"t < {half}: s[t] += s[t + {half}]; "
                                          f"__syncthreads()", 10, anchor="start")
        y += 58
        level //= 2
    s.text(430, 322, "Every step needs its barrier: a thread must not read s[t + half] before "
                     "its owner wrote it.", 11)
    return s


# ---- 04: the 32 banks, 32x32 vs 32x33 -----------------------------------------------------------
def banks():
    s = Svg(760, 440)
    s.text(380, 22, "Reading column 0 of a tile: which bank does each row's element hit?", 14,
           weight="bold")
    for k, pitch in enumerate((32, 33)):
        ox, oy, c = 30 + k * 380, 60, 10
        s.text(ox + 170, oy - 12, f"float tile[32][{pitch}]: element (r, c) is in bank "
                                  f"(r * {pitch} + c) % 32", 11)
        for r in range(32):
            for col in range(32):
                bank = (r * pitch + col) % 32
                hl = col == 0
                s.rect(ox + col * c, oy + r * c, c, c, fill=f"hsl({bank * 360 // 32},70%,50%)",
                       opacity=0.95 if hl else 0.15, stroke="#fff", sw=0.5)
        used = len({(r * pitch) % 32 for r in range(32)})
        verdict = ("all 32 reads in bank 0: a 32-way conflict, 32 turns" if used == 1
                   else "32 reads in 32 banks: one turn")
        s.text(ox + 160, oy + 32 * c + 24, verdict, 12, weight="bold")
    s.text(380, 428, "Colour = bank, 32 hues; column 0, what a warp reads, is drawn solid. One "
                     "float of padding per row moves each row's start by one bank.", 11)
    return s


# ---- 03: the stream timeline, from a GPU run's event timestamps ---------------------------------
def timeline(data):
    """data: {"device", "date", "runs": [{"streams": S, "ops": [[stream, kind, chunk, t0_ms,
    t1_ms], ...]}, ...]} with kind in h2d, kernel, d2h."""
    runs = data["runs"]
    rows = sum(r["streams"] for r in runs) + len(runs)
    s = Svg(900, 70 + rows * 22 + 50)
    s.text(450, 22, f"Chapter 03's pipeline, 1 stream vs {runs[-1]['streams']} "
                    f"({data.get('device', '')}, {data.get('date', '')}; event timestamps)",
           13, weight="bold")
    end = max(op[4] for r in runs for op in r["ops"])
    scale = 760 / end
    y = 45
    colors = {"h2d": PALETTE[0], "kernel": PALETTE[4], "d2h": PALETTE[1]}
    for r in runs:
        s.text(20, y + 14, f"{r['streams']} stream(s)", 11, anchor="start", weight="bold")
        y += 22
        for st in range(r["streams"]):
            s.text(110, y + 14, f"stream {st}", 10, anchor="end")
            for stream, kind, chunk, t0, t1 in r["ops"]:
                if stream == st:
                    s.rect(120 + t0 * scale, y, max((t1 - t0) * scale, 0.8), 18,
                           fill=colors[kind], stroke="none")
            y += 22
    for i, (kind, col) in enumerate(colors.items()):
        s.rect(120 + i * 140, y + 10, 14, 14, fill=col, stroke="none")
        s.text(140 + i * 140, y + 22, kind, 11, anchor="start")
    s.text(880, y + 22, f"0 to {end:.1f} ms", 11, anchor="end")
    return s


# ---- 05: page faults, a prefetch, and oversubscription ------------------------------------------
def managed_migration():
    fault = recorded("05", "GPU first touch by page faults, 1 GiB", "GB/s")
    pref = recorded("05", "prefetch, then the kernel, 1 GiB", "GB/s")
    fits = recorded("05", "sweep of 1 GiB managed", "GB/s")
    over = recorded("05", "sweep of 4 GiB, 2x", "GB/s")
    mapped = recorded("05", "the same 2x, preferred location host", "GB/s")
    s = Svg(900, 380)
    s.text(450, 22, "Managed memory: who moves the pages, and when (H200 figures from the "
                    "record)", 14, weight="bold")
    panels = [("on demand: page faults", PALETTE[2]), ("cudaMemPrefetchAsync", PALETTE[4]),
              ("oversubscribed: evict, fault again", PALETTE[1])]
    for k, (title, color) in enumerate(panels):
        ox = 20 + k * 295
        s.rect(ox, 40, 280, 290, fill="#fafafa", rx=6)
        s.text(ox + 140, 60, title, 12, weight="bold")
        s.text(ox + 14, 84, "host memory", 10, anchor="start")
        s.text(ox + 14, 214, "device memory" + (" (full: ballast + 2 GiB)" if k == 2 else ""),
               10, anchor="start")
        for i in range(8):
            x = ox + 14 + i * 32
            on_dev = {0: i in (0, 1, 2), 1: True, 2: i < 5}[k]
            s.rect(x, 92, 28, 28, fill="#ddd" if on_dev else color, opacity=0.8)
            s.rect(x, 222, 28, 28, fill=color if on_dev else "#fff", opacity=0.8,
                   stroke="#333" if k != 2 or i < 5 else "#bbb")
            s.text(x + 14, 111, f"p{i}", 9)
        if k == 0:
            for i in (0, 1, 2):
                s.line(ox + 28 + i * 32, 122, ox + 28 + i * 32, 218, stroke=color, arrow=True)
            s.text(ox + 110, 150, "a warp touches p3: fault;", 10, anchor="start")
            s.text(ox + 110, 164, "the driver migrates a", 10, anchor="start")
            s.text(ox + 110, 178, "batch; the warp replays", 10, anchor="start")
            s.text(ox + 140, 280, f"first touch, 1 GiB: {fmt(fault, 'GB/s')}", 11,
                   weight="bold")
            s.text(ox + 140, 298, "batch after batch, each a round trip", 10)
        elif k == 1:
            s.line(ox + 120, 124, ox + 120, 218, stroke=color, sw=6, arrow=True)
            s.text(ox + 136, 160, "every page, one bulk", 10, anchor="start")
            s.text(ox + 136, 174, "move, in stream order", 10, anchor="start")
            s.text(ox + 140, 280, f"prefetch + kernel, 1 GiB: {fmt(pref, 'GB/s')}", 11,
                   weight="bold")
            s.text(ox + 140, 298, "then the kernel runs on resident pages", 10)
        else:
            s.line(ox + 28 + 5 * 32, 122, ox + 28 + 5 * 32, 218, stroke=color, arrow=True)
            s.line(ox + 28 + 0 * 32, 218, ox + 28 + 0 * 32, 124, stroke="#777", arrow=True)
            s.text(ox + 108, 150, "to bring p5 in, p0 goes", 10)
            s.text(ox + 108, 164, "out; the next sweep", 10)
            s.text(ox + 108, 178, "needs p0 first", 10)
            s.text(ox + 140, 280, f"4 GiB against 2 GiB free: {fmt(over, 'GB/s')}", 11,
                   weight="bold")
            s.text(ox + 140, 298, f"(fits: {fmt(fits, 'GB/s')}; host-mapped: "
                                  f"{fmt(mapped, 'GB/s')})", 10)
    s.text(450, 356, "Correct either way; the difference is speed. Prefetch what a kernel will "
                     "use, and keep the working set below the free device memory.", 11)
    return s


# ---- 06: a pitched 2D array ---------------------------------------------------------------------
def pitch():
    s = Svg(860, 300)
    s.text(430, 22, "cudaMallocPitch(&d, &pitch, 4004, 4): rows of 1001 floats, each padded to "
                    "pitch = 4096 bytes", 13, weight="bold")
    ox, scale = 60, 700 / 4096
    for r in range(4):
        y = 50 + r * 40
        s.text(ox - 8, y + 20, f"row {r}", 11, anchor="end")
        s.rect(ox, y, 4004 * scale, 28, fill=PALETTE[0], opacity=0.35)
        s.rect(ox + 4004 * scale, y, 92 * scale, 28, fill="#ccc")
        s.text(ox + 4004 * scale / 2, y + 19, f"(char *)d + {r} * pitch: 1001 floats "
                                               f"(4004 bytes)", 10)
    s.text(ox + 4004 * scale + 46 * scale, 44, "pad: 92 B", 10)
    s.line(ox, 226, ox + 700, 226, arrow=True)
    s.text(ox + 350, 242, "pitch: 4096 bytes (a multiple of 512 on the H200, from the "
                          "lesson's run; the emulator does the same)", 10)
    s.text(430, 268, "element (r, c): ((float *)((char *)d + r * pitch))[c]. Stepping rows by "
                     "the width (4004) reads row 0's padding as row 1.", 11)
    s.text(430, 286, "cudaMemcpy2D(dst, dpitch, src, spitch, 4004, 4, kind) copies the 4004 "
                     "bytes of each row between two pitches.", 11)
    return s


# ---- 06: the vectorised copy's head, body and tail ----------------------------------------------
def vec4():
    """What copy_vec4_kernel (06.3) does with n = 75 floats starting 3 floats past a 128-byte
    boundary: head = floats to the next 128-byte boundary, the body as float4, the tail. The
    arithmetic is the solution's (solutions/06_alignment/alignment.cu)."""
    lead, n = 3, 75
    head = min(((128 - (4 * lead) % 128) % 128) // 4, n)
    n4 = (n - head) // 4
    tail = n - head - 4 * n4
    s = Svg(900, 250)
    s.text(450, 22, f"copy_vec4_kernel on n = {n} floats, src {4 * lead} bytes past a 128-byte "
                    f"boundary: head {head}, body {n4} float4, tail {tail}", 13, weight="bold")
    ox, w = 30, 840 / (n + lead)
    for i in range(-lead, n):
        x = ox + (i + lead) * w
        if i < 0:
            fill, op = "#eee", 1.0
        elif i < head:
            fill, op = PALETTE[1], 0.8
        elif i < head + 4 * n4:
            fill, op = PALETTE[0], 0.5 + 0.3 * (((i - head) // 4) % 2)
        else:
            fill, op = PALETTE[2], 0.8
        s.rect(x, 60, w, 34, fill=fill, opacity=op, stroke="#fff", sw=0.5)
    for b in range(0, n + lead + 1, 32):   # 128-byte boundaries of the address space
        x = ox + b * w
        s.line(x, 50, x, 104, stroke="#333", sw=2)
        s.text(x, 118, f"{4 * b} B", 9)
    s.text(ox + (lead + head / 2) * w, 140, f"head: {head} floats, one thread each", 10)
    s.text(ox + (lead + head + 2 * n4) * w, 140, f"body: {n4} float4, 16-byte aligned", 10)
    s.text(ox + (lead + n - tail / 2) * w, 156, f"tail: {tail}", 10)
    s.text(450, 184, "Thread t copies head float t, then float4 t of the body (a grid-stride "
                     "loop), then tail float t.", 11)
    s.text(450, 202, "A warp's 32 float4 are 512 bytes: 4 whole 128-byte lines, when the body "
                     "starts on a line, as the head makes it.", 11)
    s.text(450, 220, "dst must sit at the same offset modulo 16 as src: the same head then "
                     "aligns both, or no shift can.", 11)
    s.text(450, 238, "Without the head, the first float4 load is misaligned: "
                     "cudaErrorMisalignedAddress, on a GPU and on the emulator.", 11)
    return s


# ---- 07: tpool's arena and free lists, from the solutions' pool ----------------------------------
def arena(data):
    """data: docs/figures/07_arena.json, written by chapter 07's demo from its tpool."""
    cap, top = data["capacity"], data["top"]
    s = Svg(900, 330)
    s.text(450, 22, f"tpool after {len(data['steps'])} steps: one cudaMalloc of {cap} bytes, "
                    f"carved to offset {top}", 13, weight="bold")
    ox, scale = 30, 840 / cap
    cls = sorted({b["bytes"] for b in data["blocks"]})
    color = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(cls)}
    for j, b in enumerate(data["blocks"]):
        x, w = ox + b["offset"] * scale, b["bytes"] * scale
        s.rect(x, 60, w, 50, fill=color[b["bytes"]], opacity=0.85 if b["live"] else 0.15)
        if b["live"]:
            s.rect(x, 60, b["requested"] * scale, 8, fill="#333", stroke="none", opacity=0.6)
        s.text(x + w / 2, 88, f"{b['bytes']}", 10)
        s.text(x + w / 2, 102, "free" if not b["live"] else
               ("reused" if b["reused"] else "live"), 9)
        s.text(x, 124 + 10 * (j % 2), f"{b['offset']}", 8, anchor="start")   # staggered
    s.rect(ox + top * scale, 60, (cap - top) * scale, 50, fill="#fff", stroke="#999")
    s.text(ox + (top + cap) / 2 * scale, 90, "not carved yet", 10)
    s.line(ox + top * scale, 44, ox + top * scale, 58, arrow=True)
    s.text(ox + top * scale, 40, f"top = {top}", 10)
    y = 160
    s.text(ox, y, "free lists, one per size class (head first: the next block handed out):",
           11, anchor="start", weight="bold")
    for k, (c, offs) in enumerate(sorted(data["free_lists"].items(), key=lambda x: int(x[0]))):
        yy = y + 22 + k * 26
        s.rect(ox, yy - 13, 16, 16, fill=color[int(c)], opacity=0.85)
        s.text(ox + 24, yy, f"class {c} bytes: head -> " + " -> ".join(f"block at {o}"
                                                                     for o in offs) + " -> end",
               11, anchor="start")
    s.text(450, 262, f"live {data['live_bytes']} bytes for {data['requested']} asked (the dark "
                     f"strip: what was asked): internal fragmentation", 11)
    s.text(450, 280, f"{data['cached_bytes']} bytes free, but only for their own class: a "
                     f"2048-byte request must carve at the top (external fragmentation)", 11)
    s.text(450, 298, f"carved {data['carved']}, reused {data['reused']}: the 600-byte request "
                     f"got the 1024-byte block freed last", 11)
    return s


PICTURES = {"hierarchy.svg": hierarchy, "memory-hierarchy.svg": memory,
            "matmul-tiles.svg": matmul, "reduction-tree.svg": reduction,
            "banks-32x32-vs-32x33.svg": banks, "managed-migration.svg": managed_migration,
            "pitch-padding.svg": pitch, "float4-head-body-tail.svg": vec4}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="fail if docs/img/ is out of date")
    p.add_argument("--timeline", default=str(REPO / "build" / "figures" / "03_timeline.json"),
                   help="chapter 03's timestamps (written by its --bench on a GPU)")
    args = p.parse_args(argv)
    out = dict((name, fn().render()) for name, fn in PICTURES.items())
    tl = Path(args.timeline)
    committed_tl = REPO / "docs" / "figures" / "03_timeline.json"
    if not args.check and tl.exists() and json.loads(tl.read_text()).get("backend") == "gpu":
        data = json.loads(tl.read_text())   # a GPU run's timestamps become committed data
        data.setdefault("device", query(["nvidia-smi", "--query-gpu=name",
                                         "--format=csv,noheader"]).split("\n")[0] or "GPU")
        committed_tl.write_text(json.dumps(data, indent=0) + "\n")
        print(f"copied {tl} to {committed_tl.relative_to(REPO)}")
    if committed_tl.exists():
        out["stream-timeline.svg"] = timeline(json.loads(committed_tl.read_text())).render()
    # Chapter 07's arena: what its demo's tpool did (host bookkeeping, the same on any backend)
    arena_run = REPO / "build" / "figures" / "07_arena.json"
    committed_arena = REPO / "docs" / "figures" / "07_arena.json"
    if not args.check and arena_run.exists():
        committed_arena.write_text(arena_run.read_text())
        print(f"copied {arena_run.relative_to(REPO)} to {committed_arena.relative_to(REPO)}")
    if committed_arena.exists():
        out["tpool-arena.svg"] = arena(json.loads(committed_arena.read_text())).render()
    stale = []
    for name, text in out.items():
        path = OUT / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO)}")
    if "stream-timeline.svg" not in out:
        print("note: no GPU timeline yet (chapter 03's --bench on a GPU writes "
              "build/figures/03_timeline.json; make bench BACKEND=gpu runs it): "
              "stream-timeline.svg not drawn")
    if stale:
        print(f"out of date: {', '.join(stale)}: run make pictures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
