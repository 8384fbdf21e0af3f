#!/usr/bin/env python3
"""Plots bench/scale.sh's runs: the controller's RSS (stable and peak) and the repaired rack's
release latency (p50, p99) against the cluster's size (nodes, with its jobs), the median of the
runs at each size, one set of lines per results file (e.g. before and after a change). Writes
SVG by hand (no third-party packages).

  scale_graph.py <out.svg> <label>=<results.jsonl>...

<results.jsonl>: the run lines bench/scale.sh prints (SCALE_RESULTS=file appends them).
"""
import collections
import json
import statistics
import sys

W, H = 860, 360
PANEL_W, PANEL_H = 340, 230
LEFT = [70, 500]
TOP = 60
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_max(value):
    if value <= 0:
        return 1
    step = 10 ** (len(str(int(value))) - 1)
    for mult in (1, 2, 2.5, 5, 10):
        if value <= mult * step:
            return mult * step
    return 10 * step


def panel(out, x0, title, unit, xs, series, target=None):
    """series: [(label, [y per x])]; xs: [(nodes, jobs)]; a log2-spaced x axis by position."""
    ymax = nice_max(max([y for _, ys in series for y in ys if y is not None] + [target or 0]) * 1.1)
    out.append(f'<text x="{x0 + PANEL_W / 2}" y="{TOP - 25}" text-anchor="middle" '
               f'font-size="14" font-weight="bold">{esc(title)}</text>')
    out.append(f'<rect x="{x0}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#333"/>')
    for i in range(6):
        y = TOP + PANEL_H - PANEL_H * i / 5
        out.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + PANEL_W}" y2="{y}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4}" text-anchor="end" font-size="11">'
                   f'{ymax * i / 5:g}</text>')
    out.append(f'<text x="{x0 - 48}" y="{TOP + PANEL_H / 2}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 {x0 - 48} {TOP + PANEL_H / 2})">{esc(unit)}</text>')
    n = len(xs)

    def px(i):
        return x0 + PANEL_W * (i + 0.5) / n

    def py(v):
        return TOP + PANEL_H - PANEL_H * v / ymax

    for i, (nodes, jobs) in enumerate(xs):
        out.append(f'<text x="{px(i)}" y="{TOP + PANEL_H + 16}" text-anchor="middle" font-size="11">'
                   f'{nodes:,} nodes</text>')
        out.append(f'<text x="{px(i)}" y="{TOP + PANEL_H + 30}" text-anchor="middle" font-size="10" '
                   f'fill="#555">{jobs:,} jobs</text>')
    if target is not None:
        out.append(f'<line x1="{x0}" y1="{py(target)}" x2="{x0 + PANEL_W}" y2="{py(target)}" '
                   f'stroke="#999" stroke-dasharray="5,4"/>')
        out.append(f'<text x="{x0 + PANEL_W - 4}" y="{py(target) - 4}" text-anchor="end" '
                   f'font-size="10" fill="#666">target {target:g}</text>')
    for k, (label, ys) in enumerate(series):
        color = COLORS[k % len(COLORS)]
        points = " ".join(f"{px(i):.1f},{py(y):.1f}" for i, y in enumerate(ys) if y is not None)
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>')
        for i, y in enumerate(ys):
            if y is None:
                continue
            out.append(f'<circle cx="{px(i):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"/>')
            out.append(f'<text x="{px(i):.1f}" y="{py(y) - 7:.1f}" text-anchor="middle" '
                       f'font-size="10" fill="{color}">{y:.3g}</text>')
        out.append(f'<rect x="{x0 + 10}" y="{TOP + 10 + 16 * k}" width="12" height="4" fill="{color}"/>')
        out.append(f'<text x="{x0 + 26}" y="{TOP + 15 + 16 * k}" font-size="11">{esc(label)}</text>')


def main():
    sets = []
    for arg in sys.argv[2:]:
        label, path = arg.split("=", 1)
        by_size = collections.defaultdict(list)
        for line in open(path):
            if line.strip():
                r = json.loads(line)
                if not r.get("failed"):  # a failed run's figures are in its line, not the graph
                    by_size[(r["nodes"], r["jobs"])].append(r)
        sets.append((label, by_size))
    xs = sorted({size for _, by_size in sets for size in by_size})

    def med(by_size, get):
        # a size a set did not run: its neighbours' line skips it (plotted at 0 otherwise)
        return [statistics.median(get(r) for r in by_size[x]) if by_size.get(x) else None
                for x in xs]

    rss, latency, runs = [], [], []
    for label, by_size in sets:
        rss.append((f"{label}: stable", med(by_size, lambda r: r["rss_stable_mb"])))
        rss.append((f"{label}: peak", med(by_size, lambda r: r["rss_peak_mb"])))
        latency.append((f"{label}: p50", med(by_size, lambda r: r["rack"]["p50_s"])))
        latency.append((f"{label}: p99", med(by_size, lambda r: r["rack"]["p99_s"])))
        runs.append(f"{label} " + ", ".join(f"{n:,}: {len(by_size[(n, j)])}"
                                            for n, j in xs if by_size.get((n, j))))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif">', f'<rect width="{W}" height="{H}" fill="white"/>']
    panel(out, LEFT[0], "ncclguard controller RSS", "MB", xs, rss)
    panel(out, LEFT[1], "Repaired rack: release latency", "seconds", xs, latency, target=1)
    out.append(f'<text x="{W / 2}" y="{H - 26}" text-anchor="middle" font-size="10" fill="#555">'
               f'bench/scale.sh on kwok, 16-64 pods per job; median of the runs at each size; '
               f'rack: 500 nodes Fail to Pass over 60 s, 100 held jobs</text>')
    out.append(f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle" font-size="10" fill="#555">'
               f'runs per size: {esc("; ".join(runs))}</text>')
    out.append("</svg>")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        sys.exit(__doc__)
    main()
