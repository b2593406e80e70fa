# SPDX-License-Identifier: MIT
"""Draws chapter 06's bench numbers as an SVG, with the Python standard library only.

    make run CH=06 ARGS="--bench --svg chapters/06_alignment/sweep.svg"   the bench calls write_svg()
    python3 chapters/06_alignment/sweep_svg.py numbers.json sweep.svg      or from numbers saved as JSON:
        {"title": "...", "stride": [[k, share], ...], "offset": [[k, share], ...],
         "copy": [[offset, ratio], ...]}

Left: the strided and offset copies (one float per thread), as shares of device-to-device
cudaMemcpy. Right: the vectorised copy at each offset, as a ratio to cudaMemcpy timed next to
it, with the 95% target.
"""
import json
import sys
from xml.sax.saxutils import escape

W, H = 940, 380
TOP, BOTTOM, LEFT = 56, 316, 74          # plot area, in pixels
PANEL_W, GAP = 360, 110
Y_MAX = 1.10                             # shares up to 110%
BLUE, ORANGE, GREY = "#1f5fa8", "#d9711c", "#888888"


def _y(share):
    return BOTTOM - (BOTTOM - TOP) * min(max(share, 0.0), Y_MAX) / Y_MAX


def _axes(x0, title, xlabel, xticks, xpos):
    out = [f'<text x="{x0 + PANEL_W / 2}" y="{TOP - 14}" text-anchor="middle" '
           f'font-weight="bold">{escape(title)}</text>']
    for pct in (0, 25, 50, 75, 100):
        y = _y(pct / 100)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + PANEL_W}" y2="{y:.1f}" '
                   f'stroke="#e4e4e4"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{pct}%</text>')
    out.append(f'<line x1="{x0}" y1="{BOTTOM}" x2="{x0 + PANEL_W}" y2="{BOTTOM}" '
               f'stroke="black"/>')
    out.append(f'<line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{BOTTOM}" stroke="black"/>')
    for t in xticks:
        x = xpos(t)
        out.append(f'<line x1="{x:.1f}" y1="{BOTTOM}" x2="{x:.1f}" y2="{BOTTOM + 4}" '
                   f'stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{BOTTOM + 17}" text-anchor="middle">{t}</text>')
    out.append(f'<text x="{x0 + PANEL_W / 2}" y="{BOTTOM + 36}" text-anchor="middle">'
               f'{escape(xlabel)}</text>')
    yc = (TOP + BOTTOM) / 2
    out.append(f'<text x="{x0 - 46}" y="{yc}" text-anchor="middle" '
               f'transform="rotate(-90 {x0 - 46} {yc})">share of cudaMemcpy</text>')
    return out


def _sweep_panel(x0, stride, offset):
    k_max = max([k for k, _ in stride + offset] + [32])

    def xpos(k):
        return x0 + PANEL_W * k / k_max

    out = _axes(x0, "one float per thread: stride k or offset k", "k (floats)",
                range(0, k_max + 1, 8), xpos)
    for pts, colour, label, ly in ((stride, BLUE, "stride k", 0), (offset, ORANGE, "offset k", 18)):
        if not pts:
            continue
        path = " ".join(f"{xpos(k):.1f},{_y(s):.1f}" for k, s in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out += [f'<circle cx="{xpos(k):.1f}" cy="{_y(s):.1f}" r="3" fill="{colour}"/>'
                for k, s in pts]
        lx = x0 + PANEL_W - 110
        out.append(f'<line x1="{lx}" y1="{TOP + 12 + ly}" x2="{lx + 20}" y2="{TOP + 12 + ly}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 26}" y="{TOP + 16 + ly}">{label}</text>')
    return out


def _copy_panel(x0, copy):
    n = max(len(copy), 1)
    slot = PANEL_W / n

    def xpos(off):
        return x0 + slot * (off + 0.5)

    out = _axes(x0, "float4 copy at offset k, over cudaMemcpy", "offset of source and "
                "destination (floats)", [k for k, _ in copy], xpos)
    for k, r in copy:
        colour = BLUE if r >= 0.95 else ORANGE
        y = _y(r)
        out.append(f'<rect x="{xpos(k) - slot * 0.35:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" '
                   f'height="{BOTTOM - y:.1f}" fill="{colour}"><title>offset {k}: '
                   f'{r:.1%}</title></rect>')
    y95 = _y(0.95)
    out.append(f'<line x1="{x0}" y1="{y95:.1f}" x2="{x0 + PANEL_W}" y2="{y95:.1f}" '
               f'stroke="{GREY}" stroke-dasharray="6,4" stroke-width="1.5"/>')
    if copy:
        worst = min(r for _, r in copy)
        out.append(f'<text x="{x0 + PANEL_W / 2}" y="{TOP + 2}" text-anchor="middle">'
                   f'worst offset: {worst:.1%} (dashed: the 95% target)</text>')
    return out


def render(numbers):
    """The SVG document, as a string, for a dict shaped like the module docstring's JSON."""
    body = [f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">'
            f'{escape(str(numbers.get("title", "06 alignment")))}</text>']
    body += _sweep_panel(LEFT, [tuple(p) for p in numbers.get("stride", [])],
                         [tuple(p) for p in numbers.get("offset", [])])
    body += _copy_panel(LEFT + PANEL_W + GAP, [tuple(p) for p in numbers.get("copy", [])])
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">\n'
            f'<rect width="{W}" height="{H}" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")


def write_svg(path, numbers):
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(numbers))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        write_svg(sys.argv[2], json.load(f))
