#!/usr/bin/env python3
"""plot.py DIR — draws the plots of a bench/peers.sh run as SVG files in DIR.

From DIR/servers.jsonl (one JSON line per run of ../shared/bench/servers/run.sh):
  servers.md           the table: medians over the rounds per (sessions, server)
  cpu_per_delta.svg    server CPU per delivered delta vs sessions (log-log)
  kib_per_session.svg  peak RSS per session vs sessions
  gap_p99.svg          p99 gap between a session's deltas vs sessions
  first_delta.svg      time to the first delta, p50 and p99, vs sessions
From DIR/pi.jsonl (the compare bench's rows, WEFT_COMPARE_JSON), if there:
  pi.svg               pi ÷ Weft per workload and measure

Each point is the median over the rounds of a (server, sessions) pair. Plain SVG, written by
hand: no plotting package to install.
"""
import json
import math
import os
import re
import statistics
import sys
from html import escape

COLORS = ["#1f6feb", "#8957e5", "#d1242f", "#bf8700", "#1a7f37", "#57606a"]
W, H = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 190, 40, 50


def label(run):
    extra = run.get("extra") or {}
    name = run["server"]
    if run["server"] != "weft":
        return name
    if "(postgres)" in str(extra.get("binary_version", "")):
        return name + " (Postgres)"
    if extra.get("store") == "sqlite":
        return name + " (SQLite)"
    return name + " (memory)"


def steady_cpu(run):
    """Server CPU per delivered delta in the harness's steady window (the whole run's if none)."""
    return (run.get("steady") or {}).get("cpu_us_per_delta") or run["run"]["cpu_us_per_delta"]


TABLE = [
    ("CPU µs/Δ (steady)", steady_cpu, 1),
    ("CPU µs/Δ (whole run)", lambda r: r["run"]["cpu_us_per_delta"], 1),
    ("KiB/session", lambda r: r["rss_kib"]["per_session_peak"], 0),
    ("TTFB p50 / p99 ms", lambda r: (r["ttfb_ms"]["p50"], r["ttfb_ms"]["p99"]), 1),
    ("first delta p99 ms", lambda r: r["ttfd_ms"]["p99"], 0),
    ("gap p99 ms", lambda r: r["gap_ms"]["p99"], 0),
    ("deltas delivered", lambda r: f"{r['deltas_delivered']:,}/{r['deltas_expected']:,}", None),
]


def table(runs):
    """The Markdown table: one row per (sessions, server), medians over the rounds."""
    groups = {}
    for run in runs:
        if "error" in run:
            continue
        groups.setdefault((run["sessions"], label(run)), []).append(run)
    order = lambda key: (key[0], not key[1].startswith("weft"), key[1])
    lines = ["| sessions | server | runs | " + " | ".join(name for name, _, _ in TABLE) + " |",
             "|---" * (len(TABLE) + 3) + "|"]
    for key in sorted(groups, key=order):
        group = groups[key]
        cells = []
        for _, metric, digits in TABLE:
            values = [metric(r) for r in group]
            if digits is None:
                cells.append(str(values[0]))
            elif isinstance(values[0], tuple):
                parts = zip(*values)
                cells.append(" / ".join(f"{statistics.median(p):,.{digits}f}" for p in parts))
            else:
                cells.append(f"{statistics.median(values):,.{digits}f}")
        ok = ", ".join(sorted({f"{r['sessions_ok']}/{r['sessions']} ok" for r in group}))
        lines.append(f"| {key[0]:,} | {key[1]} | {len(group)} ({ok}) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def series(runs, metric):
    """{label: [(sessions, median value)]} over the runs that delivered every delta."""
    groups = {}
    for run in runs:
        if "error" in run or run.get("sessions_ok") != run.get("sessions"):
            continue
        value = metric(run)
        if value is None:
            continue
        groups.setdefault(label(run), {}).setdefault(run["sessions"], []).append(value)
    return {
        name: sorted((s, statistics.median(vs)) for s, vs in by_s.items())
        for name, by_s in sorted(groups.items(), key=lambda kv: (not kv[0].startswith("weft"), kv[0]))
    }


def ticks(lo, hi, log):
    if log:
        out = []
        for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
            for m in (1, 2, 5):
                v = m * 10**e
                if lo <= v <= hi:
                    out.append(v)
        return out or [lo, hi]
    step = 10 ** math.floor(math.log10(max(hi - lo, 1e-9)))
    while (hi - lo) / step > 8:
        step *= 2
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1) if start + i * step >= lo]


def fmt(v):
    return f"{v:,.0f}" if v >= 10 else f"{v:g}"


def svg_start(width, height, title, title_x):
    """An SVG's opening: white page and title."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{title_x}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']


def svg_write(path, out):
    """Closes the SVG and writes it."""
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True


def line_chart(path, title, ylabel, data, log_y=False):
    points = [p for pts in data.values() for p in pts]
    if not points:
        return False
    xs = sorted({x for x, _ in points})
    ys = [y for _, y in points]
    x_lo, x_hi = min(xs) / 1.3, max(xs) * 1.3
    y_lo = min(ys) / 1.5 if log_y else 0
    y_hi = max(ys) * (1.5 if log_y else 1.1)

    def px(x):
        return LEFT + (math.log(x) - math.log(x_lo)) / (math.log(x_hi) - math.log(x_lo)) * (W - LEFT - RIGHT)

    def py(y):
        if log_y:
            f = (math.log(y) - math.log(y_lo)) / (math.log(y_hi) - math.log(y_lo))
        else:
            f = (y - y_lo) / (y_hi - y_lo)
        return H - BOTTOM - f * (H - TOP - BOTTOM)

    out = svg_start(W, H, title, W / 2 - RIGHT / 2)
    for y in ticks(y_lo if log_y else 0, y_hi, log_y):
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{fmt(y)}</text>')
    for x in xs:
        out.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#eee"/>')
        out.append(f'<text x="{px(x):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{x:,}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 10}" text-anchor="middle">concurrent sessions (20 deltas/s each)</text>')
    out.append(f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" transform="rotate(-90 16 {(TOP + H - BOTTOM) / 2})">{escape(ylabel)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" fill="none" stroke="#888"/>')
    for i, (name, pts) in enumerate(data.items()):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"><title>{escape(name)}: {fmt(y)} at {x}</title></circle>')
        ly = TOP + 14 + i * 20
        out.append(f'<line x1="{W - RIGHT + 12}" x2="{W - RIGHT + 32}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{W - RIGHT + 38}" y="{ly}">{escape(name)}</text>')
    return svg_write(path, out)


def ratio(text):
    """The number in a ratio cell such as "6.2×" or "9.8× (best 10.1×)"; None when absent."""
    m = re.match(r"\s*([0-9][0-9,.]*)\s*×", text or "")
    return float(m.group(1).replace(",", "")) if m else None


def bar_chart(path, title, rows):
    # The measure without its parenthesis (what it counts is in pi.md).
    rows = [(f"{r['workload']}: {re.sub(r' [(].*', '', r['measure'])}", ratio(r["ratio"])) for r in rows]
    rows = [(name, v) for name, v in rows if v]
    if not rows:
        return False
    left, bar, gap = 420, 22, 8
    height = TOP + len(rows) * (bar + gap) + 40
    top = max(v for _, v in rows) * 1.15
    width = 960

    def px(v):
        return left + v / top * (width - left - 60)

    out = svg_start(width, height, title, width / 2)
    out.append(f'<line x1="{px(1):.1f}" x2="{px(1):.1f}" y1="{TOP - 6}" y2="{height - 30}" stroke="#d1242f" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{px(1):.1f}" y="{height - 16}" text-anchor="middle" fill="#d1242f">1× (as fast)</text>')
    for i, (name, v) in enumerate(rows):
        y = TOP + i * (bar + gap)
        out.append(f'<text x="{left - 8}" y="{y + bar * 0.7:.1f}" text-anchor="end">{escape(name[:66])}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{px(v) - left:.1f}" height="{bar}" fill="{COLORS[0]}"/>')
        out.append(f'<text x="{px(v) + 4:.1f}" y="{y + bar * 0.7:.1f}">{v:g}×</text>')
    return svg_write(path, out)


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    drawn = []
    servers = os.path.join(out, "servers.jsonl")
    if os.path.exists(servers):
        runs = load(servers)
        with open(os.path.join(out, "servers.md"), "w") as f:
            f.write(table(runs))
        charts = [
            ("cpu_per_delta.svg", "Server CPU per delivered delta (steady window)",
             "µs of CPU per delta (log)", steady_cpu, True),
            ("kib_per_session.svg", "Memory per streaming session", "KiB of peak RSS per session (log)",
             lambda r: r["rss_kib"]["per_session_peak"], True),
            ("gap_p99.svg", "p99 gap between a session's deltas (paced at 50 ms)", "ms",
             lambda r: r["gap_ms"]["p99"], False),
            ("first_delta.svg", "Time to the first delta, p99 (the model waits 50 ms first)", "ms",
             lambda r: r["ttfd_ms"]["p99"], False),
        ]
        for name, title, ylabel, metric, log_y in charts:
            if line_chart(os.path.join(out, name), title, ylabel, series(runs, metric), log_y):
                drawn.append(name)
    pi = os.path.join(out, "pi.jsonl")
    if os.path.exists(pi) and bar_chart(os.path.join(out, "pi.svg"), "pi-agent-core 1.5.2 ÷ Weft (higher: Weft ahead)", load(pi)):
        drawn.append("pi.svg")
    print("plot.py: drew " + (", ".join(drawn) if drawn else "nothing (no results)"), file=sys.stderr)


main()
