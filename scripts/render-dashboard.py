#!/usr/bin/env python3
"""Runs every panel query of ncclguard's Grafana dashboard against a real Prometheus and draws
the panels into one PNG where the dashboard places them (docs/operator.md, "Dashboard").

    scripts/render-dashboard.py --prometheus http://127.0.0.1:9090 --out dashboard.png \\
        [--require-data [--allow-empty REGEX]...] [--range 1h] [--end UNIX] [--report FILE]

Each panel's targets go to /api/v1/query_range (time series) or /api/v1/query (targets marked
instant: bar gauges, stats, tables), with Grafana's $__rate_interval, $__interval and $__range
given values. One line per panel says how many series it returned, and which ncclguard metric
names it uses that Prometheus has never stored. Needs python3 and, for --out, gnuplot
(gnuplot-nox, scripts/bootstrap.sh). Talks to the --prometheus URL only.

Exit status: 0; 1 when a query fails (a parse error: Prometheus answers bad_data), when
--require-data is given and a panel whose title no --allow-empty matches returned no series, or
when gnuplot fails; 2 for a usage error or a Prometheus that cannot be reached.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DASHBOARD = os.path.join(ROOT, "charts", "ncclguard", "dashboards", "ncclguard.json")
METRIC_NAME = re.compile(r"\bncclguard_[a-z0-9_]+\b")
DURATION = re.compile(r"^(\d+)(s|m|h|d)$")

STATUS_CODES = {"Pass": 0, "Warn": 1, "Fail": 2, "Skip": 3}
MAX_LINES = 8  # series drawn in one time-series panel; the rest are counted in its title
MAX_BARS = 12


class QueryError(Exception):
    """Prometheus refused a query (bad_data: it does not parse, or it cannot run)."""


class Unreachable(Exception):
    """No answer from Prometheus at all."""


def seconds(text):
    match = DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError("%r is not a duration like 30s, 5m, 1h" % text)
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


class Prometheus:
    def __init__(self, url, timeout):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def get(self, path, params=None):
        data = urllib.parse.urlencode(params or {}).encode()
        request = urllib.request.Request(self.url + path, data=data if params else None)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as error:
            try:
                body = json.load(error)
            except ValueError:
                raise Unreachable("%s: HTTP %d" % (path, error.code)) from error
            raise QueryError("%s: %s" % (body.get("errorType", "error"), body.get("error", "?"))) from error
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise Unreachable("%s%s: %s" % (self.url, path, error)) from error
        if body.get("status") != "success":
            raise QueryError("%s: %s" % (body.get("errorType", "error"), body.get("error", "?")))
        return body["data"]


def expand(expr, window):
    """Grafana's variables in a query, as Grafana would set them for this window."""
    for name, value in (("$__rate_interval", window["rate"]), ("${__rate_interval}", window["rate"]),
                        ("$__interval", window["step"]), ("${__interval}", window["step"]),
                        ("$__range", window["range"]), ("${__range}", window["range"])):
        expr = expr.replace(name, "%ds" % value)
    return expr


def legend(target, labels):
    form = target.get("legendFormat") or "__auto"
    if form == "__auto":
        return ",".join("%s=%s" % kv for kv in sorted(labels.items()) if kv[0] != "__name__") or "value"
    return re.sub(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", lambda m: labels.get(m.group(1), ""), form)


def data_panels(dashboard):
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            yield panel  # kept for the row titles in the picture
            for inner in panel.get("panels", []):  # a collapsed row holds its panels
                yield inner
        else:
            yield panel


def run_panel(prometheus, panel, window):
    """The panel's series: [(target, labels, [(t, value)])]."""
    series = []
    for target in panel.get("targets", []):
        expr = expand(target["expr"], window)
        if target.get("instant") and not target.get("range"):
            data = prometheus.get("/api/v1/query", {"query": expr, "time": window["end"]})
            for item in data["result"] if data["resultType"] == "vector" else []:
                series.append((target, item["metric"], [(float(item["value"][0]), float(item["value"][1]))]))
            if data["resultType"] == "scalar":
                series.append((target, {}, [(float(data["result"][0]), float(data["result"][1]))]))
        else:
            data = prometheus.get("/api/v1/query_range", {
                "query": expr, "start": window["end"] - window["range"], "end": window["end"], "step": window["step"]})
            for item in data["result"]:
                series.append((target, item["metric"], [(float(t), float(v)) for t, v in item["values"]]))
    return series


# The picture: gnuplot's pngcairo, each panel at its gridPos (24 columns, rows of 30 px as in
# Grafana), drawn as lines (time series), horizontal bars (instant targets) or a status matrix
# (a table grouped into a matrix, the node checks).
COLUMN_PX, ROW_PX, HEADER_PX = 100, 30, 40


def gp_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def finite(value):
    return value if math.isfinite(value) else float("nan")


def draw_timeseries(out, path, panel, series, window):
    ranked = sorted(series, key=lambda s: -max((abs(v) for _, v in s[2] if math.isfinite(v)), default=0))
    shown, hidden = ranked[:MAX_LINES], len(ranked) - MAX_LINES
    times = sorted({t for _, _, points in shown for t, _ in points})
    with open(path, "w") as data:
        data.write("time\t" + "\t".join(legend(t, l).replace("\t", " ") or "value" for t, l, _ in shown) + "\n")
        columns = [dict(points) for _, _, points in shown]
        for t in times:
            data.write("%d\t%s\n" % (t, "\t".join("%g" % finite(c.get(t, float("nan"))) for c in columns)))
    if hidden > 0:
        out.append("set title %s" % gp_string("%s (+%d more)" % (panel["title"], hidden)))
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    out += ["set xdata time", 'set timefmt "%s"', 'set format x "%H:%M"',
            "set xrange [%d:%d]" % (window["end"] - window["range"], window["end"]),
            "set ylabel %s" % gp_string({"reqps": "req/s", "ops": "ops/s", "short": ""}.get(unit, unit)),
            'set key top left font ",7" samplen 1 spacing 0.8 opaque', "set grid",
            "plot for [i=2:%d] %s using 1:i with lines lw 1.5 title columnheader(i)" % (len(shown) + 1, gp_string(path))]


def human(value, unit):
    if not math.isfinite(value):
        return "-"
    if unit in ("s", "dtdurations"):
        for size, name in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"), (0.001, "ms")):
            if abs(value) >= size:
                return "%.3g %s" % (value / size, name)
        return "%.3g us" % (value * 1e6)
    return "%.4g" % value


def draw_bars(out, path, panel, series):
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    rows = [(legend(t, l) or "value", points[-1][1]) for t, l, points in series]
    rows = sorted(rows, key=lambda r: -r[1] if math.isfinite(r[1]) else 0)[:MAX_BARS][::-1]
    with open(path, "w") as data:
        for label, value in rows:
            data.write("%s\t%g\t %s\n" % (label.replace("\t", " "), finite(value), human(value, unit)))
    top = max([v for _, v in rows if math.isfinite(v)] + [1e-9])
    out += ["set yrange [-0.6:%g]" % (len(rows) - 0.4), "set xrange [0:%g]" % (top * 1.3), "set ytics nomirror font \",8\"",
            "set style fill solid 0.6", "unset key", "set grid x",
            "plot %s using ($2/2):0:($2/2):(0.35):yticlabels(1) with boxxyerror lc rgb \"#3274d9\", "
            "'' using 2:0:3 with labels left font \",8\"" % gp_string(path)]


def draw_matrix(out, path, panel, series, grouping):
    rows_field, columns_field, value_field = grouping["rowField"], grouping["columnField"], grouping["valueField"]
    cells = {(l.get(rows_field, ""), l.get(columns_field, "")): l.get(value_field, "") for _, l, _ in series}
    rows = sorted({r for r, _ in cells})
    columns = sorted({c for _, c in cells})
    with open(path, "w") as data:
        for x, column in enumerate(columns):
            for y, row in enumerate(rows):
                data.write("%d\t%d\t%d\n" % (x, y, STATUS_CODES.get(cells.get((row, column)), 4)))
    out += ['set palette defined (0 "#56a64b", 1 "#f2cc0c", 2 "#e02f44", 3 "#8e8e8e", 4 "#ffffff")',
            "set cbrange [-0.5:4.5]", "unset colorbox", "unset key",
            "set xrange [-0.5:%g]" % (len(columns) - 0.5), "set yrange [-0.5:%g]" % (len(rows) - 0.5),
            "set xtics (%s) rotate by 30 right font \",8\"" % ", ".join("%s %d" % (gp_string(c), i) for i, c in enumerate(columns)),
            "set ytics (%s) font \",8\"" % ", ".join("%s %d" % (gp_string(r), i) for i, r in enumerate(rows)),
            'set label 2 "green Pass, yellow Warn, red Fail, grey Skip" at graph 0, graph 1.02 font ",7"',
            # Boxes, not `with image`: an image needs a grid of 2 x 2 at least, and a one-node
            # cluster has one row.
            "plot %s using 1:2:(0.5):(0.5):3 with boxxyerror fillcolor palette fillstyle solid noborder"
            % gp_string(path)]


def render(panels, results, window, picture, title, work):
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    width, height = 24 * COLUMN_PX, bottom * ROW_PX + HEADER_PX
    out = ["set terminal pngcairo size %d,%d font \"sans,9\" noenhanced" % (width, height),
           'set datafile separator "\\t"',
           "set output %s" % gp_string(picture), "set multiplot"]
    header = "set label 100 %s at screen 0.005, screen %g font \",13\"" % (gp_string(title), 1 - 0.6 * HEADER_PX / height)
    for panel in panels:
        grid = panel["gridPos"]
        top_px = HEADER_PX + grid["y"] * ROW_PX
        origin = "set origin %g, %g" % (grid["x"] / 24, 1 - (top_px + grid["h"] * ROW_PX) / height)
        size = "set size %g, %g" % (grid["w"] / 24, grid["h"] * ROW_PX / height)
        if panel.get("type") == "row":
            # A row: its title, drawn with an empty plot over its strip of the picture.
            out += ["reset", origin, size, "unset border", "unset tics", "unset key",
                    "set label 1 %s at graph 0, graph 0.5 font \",12\"" % gp_string(panel.get("title", "")),
                    "set xrange [0:1]", "set yrange [0:1]", "plot 2 notitle"]
            continue
        out += ["reset", 'set datafile separator "\\t"', origin, size, "set title %s" % gp_string(panel["title"]), "set tmargin 2"]
        if header:  # drawn with the first panel (labels at screen coordinates)
            out.append(header)
            header = None
        # A series without one finite value (a quantile of a histogram nothing was observed in
        # yet is NaN) has nothing to draw.
        series = [s for s in results.get(panel["id"], []) if any(math.isfinite(v) for _, v in s[2])]
        path = os.path.join(work, "panel-%d.tsv" % panel["id"])
        grouping = next((t["options"] for t in panel.get("transformations", []) if t.get("id") == "groupingToMatrix"), None)
        if not series:
            out += ["unset tics", "set xrange [0:1]", "set yrange [0:1]",
                    "set label 1 \"no data\" at graph 0.5, graph 0.5 center font \",12\"", "plot 2 notitle"]
        elif grouping:
            draw_matrix(out, path, panel, series, grouping)
        elif all(t.get("instant") and not t.get("range") for t in panel.get("targets", [])):
            draw_bars(out, path, panel, series)
        else:
            draw_timeseries(out, path, panel, series, window)
    out.append("unset multiplot")
    script = os.path.join(work, "dashboard.gp")
    with open(script, "w") as f:
        f.write("\n".join(out) + "\n")
    done = subprocess.run(["gnuplot", script], capture_output=True, text=True)
    problems = [line for line in done.stderr.splitlines() if line.strip() and "warning" not in line.lower()]
    if done.returncode != 0 or problems:
        raise RuntimeError("gnuplot: " + (" | ".join(problems[-3:]) or "exit %d" % done.returncode))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--prometheus", required=True, metavar="URL", help="e.g. http://127.0.0.1:9090")
    parser.add_argument("--out", metavar="PNG", help="the picture (none without it)")
    parser.add_argument("--dashboard", default=DEFAULT_DASHBOARD, metavar="JSON",
                        help="default: charts/ncclguard/dashboards/ncclguard.json")
    parser.add_argument("--range", type=seconds, default=3600, metavar="DURATION", help="time range (default 1h)")
    parser.add_argument("--end", type=float, default=None, metavar="UNIX", help="end of the range (default now)")
    parser.add_argument("--step", type=seconds, default=None, metavar="DURATION", help="default: range / 120, at least 15s")
    parser.add_argument("--rate-interval", type=seconds, default=120, metavar="DURATION",
                        help="$__rate_interval (default 2m: 4 scrapes at 30s)")
    parser.add_argument("--require-data", action="store_true", help="fail when a panel returns no series")
    parser.add_argument("--allow-empty", action="append", default=[], metavar="REGEX",
                        help="with --require-data: panels whose title matches may be empty (repeatable)")
    parser.add_argument("--report", metavar="JSON", help="write {panel title: series count} here")
    parser.add_argument("--timeout", type=float, default=15, help="seconds per HTTP request")
    args = parser.parse_args()

    with open(args.dashboard) as f:
        dashboard = json.load(f)
    if args.out and not shutil.which("gnuplot"):
        print("render-dashboard: gnuplot not found (apt-get install gnuplot-nox, or scripts/bootstrap.sh)", file=sys.stderr)
        return 2
    end = args.end if args.end is not None else time.time()
    step = args.step or max(15, args.range // 120)
    window = {"end": end, "range": args.range, "step": step, "rate": args.rate_interval}
    prometheus = Prometheus(args.prometheus, args.timeout)
    allow = [re.compile(pattern) for pattern in args.allow_empty]

    try:
        known = set(prometheus.get("/api/v1/label/__name__/values"))
    except (Unreachable, QueryError) as error:
        print("render-dashboard: Prometheus at %s: %s" % (args.prometheus, error), file=sys.stderr)
        return 2
    panels = [p for p in data_panels(dashboard)]
    results, report, failures = {}, {}, []
    for panel in panels:
        if panel.get("type") == "row" or not panel.get("targets"):
            continue
        title = panel["title"]
        try:
            series = run_panel(prometheus, panel, window)
        except QueryError as error:
            print("FAIL  %s: %s" % (title, error))
            failures.append("%s: query failed" % title)
            report[title] = None
            continue
        except Unreachable as error:
            print("render-dashboard: Prometheus at %s: %s" % (args.prometheus, error), file=sys.stderr)
            return 2
        results[panel["id"]] = series
        report[title] = len(series)
        names = sorted({n for t in panel["targets"] for n in METRIC_NAME.findall(t["expr"])})
        unseen = [n for n in names if n not in known]
        note = " (never stored: %s)" % ", ".join(unseen) if unseen else ""
        if series:
            print("ok    %s: %d series%s" % (title, len(series), note))
        elif args.require_data and not any(p.search(title) for p in allow):
            print("FAIL  %s: no series%s" % (title, note))
            failures.append("%s: no series" % title)
        else:
            print("empty %s: no series%s" % (title, note))
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=2)
    if args.out:
        stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(end - args.range)) + " to " + time.strftime("%H:%M UTC", time.gmtime(end))
        title = "%s  -  %s  -  %s" % (dashboard.get("title", "dashboard"), args.prometheus, stamp)
        with tempfile.TemporaryDirectory(prefix="render-dashboard.") as work:
            try:
                render(panels, results, window, args.out, title, work)
                print("render-dashboard: wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)))
            except (RuntimeError, OSError) as error:
                print("FAIL  picture: %s" % error)
                failures.append("picture: %s" % error)
    counted = [v for v in report.values() if v is not None]
    summary = "%d panels, %d with series, %d failed" % (len(report), sum(1 for v in counted if v), len(failures))
    if failures:
        print("render-dashboard: FAILED: %s; %s" % (summary, "; ".join(failures)))
        return 1
    print("render-dashboard: %s" % summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
