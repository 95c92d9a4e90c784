"""A picture of a simulator trace (trace.py's Chrome trace-event JSON): a Gantt chart with one row
per warp of one CTA (or of every CTA of its cluster), bars coloured by activity, the copies and
wgmma groups in flight as translucent rows under each CTA, flow arrows from completing arrivals
to the waits they release, and the stage ring's fill level below.

Needs matplotlib (`pip install -e ".[plot]"`); it is drawn on a bare Figure (no pyplot state).
"""
from __future__ import annotations

import json
import os
from collections import defaultdict

from .trace import KINDS

MAX_FLOWS = 400             # flow arrows drawn (the first ones): more only darken the picture
MMA_CATS = ("wgmma in flight", "mma in flight")


def require_matplotlib():
    """The matplotlib module, or an ImportError that says how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("drawing a trace needs matplotlib: pip install -e \".[plot]\" (or pip install "
                          "matplotlib>=3.5)") from None
    return matplotlib


def load(trace) -> dict:
    """A trace document from a path or an already loaded dict."""
    if isinstance(trace, dict):
        return trace
    with open(os.fspath(trace)) as f:
        return json.load(f)


def chosen_pids(doc: dict, cta=None) -> list[int]:
    """The processes to draw: the CTA `cta` (x, y, z) (default: the first traced one) and the other
    CTAs of its cluster."""
    ctas = doc.get("otherData", {}).get("ctas", [])
    if not ctas:
        return []
    first = ctas[0] if cta is None else next((c for c in ctas if tuple(c["cta"]) == tuple(cta)), None)
    if first is None:
        raise ValueError(f"CTA {tuple(cta)} is not in the trace; traced: {[tuple(c['cta']) for c in ctas]}")
    if first.get("cluster") is None:
        return [first["pid"]]
    return [c["pid"] for c in ctas if c.get("cluster") == first["cluster"]]


def draw(trace, png, cta=None, title: str | None = None, dpi: int = 110) -> None:
    """Draw the timeline of `trace` (path or dict) for one CTA (or its cluster) into `png`."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    doc = load(trace)
    pids = chosen_pids(doc, cta)
    events = doc["traceEvents"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events if e["ph"] == "M"
             and e["name"] in ("thread_name", "process_name")}
    spans: dict = defaultdict(list)          # (pid, tid) -> [(kind, start, dur)]
    for e in events:
        if e["ph"] == "X" and e["pid"] in pids:
            spans[(e["pid"], e["tid"])].append((e["cat"], e["ts"], e["dur"]))
    flying = {(e["pid"], "wgmma" if e["cat"] in MMA_CATS else "copy") for e in events if e["ph"] == "b"}
    rows = []                                 # (label, key) top to bottom
    infos = {c["pid"]: c for c in doc.get("otherData", {}).get("ctas", [])}
    for pid in pids:
        tids = sorted(t for p, t in spans if p == pid)
        info = infos.get(pid, {})
        prefix = "" if len(pids) == 1 else (f"rank {info.get('rank', pid)} · " if info.get("cluster") is not None
                                            else f"CTA {tuple(info.get('cta', ()))} · ")
        for t in tids:
            rows.append((prefix + names.get((pid, t), f"warp {t}"), (pid, t)))
        for what, label in (("copy", "copies in flight"), ("wgmma", "MMA groups in flight")):
            if (pid, what) in flying:
                rows.append((prefix + label, (pid, what)))
    y_of = {key: i for i, (_, key) in enumerate(rows)}
    colours = _colours()
    fig = Figure(figsize=(14, 1.8 + 0.32 * len(rows)), dpi=dpi)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 1, height_ratios=[max(len(rows), 1) * 0.32, 1.1], hspace=0.12)
    ax = fig.add_subplot(grid[0])
    fill_ax = fig.add_subplot(grid[1], sharex=ax)
    used = set()
    steps = doc.get("otherData", {}).get("steps", 0) or 1
    least = steps / 1500               # one-step events stay visible on a long run
    for key, items in spans.items():
        by_kind = defaultdict(list)
        for kind, start, dur in items:
            by_kind[kind].append((start, max(dur, least)))
        for kind, bars in by_kind.items():
            used.add(kind)
            ax.broken_barh(bars, (y_of[key] - 0.38, 0.76), facecolors=colours.get(kind, "#999999"), linewidth=0)
    _draw_async(ax, events, pids, y_of)
    _draw_instants(ax, events, pids, y_of)
    _draw_flows(ax, events, pids, y_of)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for label, _ in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.tick_params(axis="x", labelbottom=False)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    handles = [Patch(color=colours[k], label=k) for k in KINDS if k in used]
    if any(e["ph"] == "i" and e["cat"] == "banner" for e in events):
        handles.append(Line2D([], [], color="#555555", marker="v", linestyle="", markersize=4, label="PTX banner"))
    if any(e["ph"] == "s" for e in events):
        handles.append(Line2D([], [], color="#4477aa", linewidth=0.6, label="phase completed → wait released"))
    ax.legend(handles=handles, fontsize=7, ncol=min(len(handles), 6), loc="lower left",
              bbox_to_anchor=(0, 1.0), frameon=False)
    fill_name = "stages filled"
    for pid in pids:
        pts = [(e["ts"], e["args"]["filled"]) for e in events if e["ph"] == "C" and e["pid"] == pid]
        fill_name = next((e["name"] for e in events if e["ph"] == "C" and e["pid"] == pid), fill_name)
        if pts:
            xs, ys = [0] + [p[0] for p in pts], [0] + [p[1] for p in pts]
            info = infos.get(pid, {})
            label = f"rank {info.get('rank')}" if info.get("cluster") is not None else f"CTA {tuple(info.get('cta', ()))}"
            fill_ax.step(xs, ys, where="post", linewidth=1.0, label=label if len(pids) > 1 else None)
    fill_ax.set_ylabel(fill_name.split(" (")[0].replace(" ", "\n", 1), fontsize=7)
    fill_ax.tick_params(labelsize=7)
    if len(pids) > 1:
        fill_ax.legend(fontsize=6, loc="upper right", frameon=False)
    fill_ax.set_xlabel("simulator steps (instruction order of the traced thread groups, not cycles)", fontsize=8)
    other = doc.get("otherData", {})
    first = infos.get(pids[0], {}) if pids else {}
    where = (f"cluster {tuple(first['cluster'])}, {len(pids)} CTAs" if len(pids) > 1 and first.get("cluster") is not None
             else names.get((pids[0], None), "") if pids else "")
    head = title or f"{other.get('entry', '')}: {where}"
    if other.get("stopped"):
        head += f" — stopped: {other['stopped']}"
    fig.suptitle(head, fontsize=9, x=0.01, ha="left")
    fig.subplots_adjust(left=0.2, right=0.99, top=1 - 0.75 / fig.get_figheight(), bottom=0.45 / fig.get_figheight() + 0.03)
    fig.savefig(os.fspath(png))


def _colours() -> dict:
    from matplotlib import colormaps
    cmap = colormaps["tab20"]
    fixed = {"wait mbarrier": "#d9d9d9", "wait barrier": "#bdbdbd", "wait cluster": "#969696",
             "wait async": "#f2e6c9"}
    out, n = {}, 0
    for k in KINDS:
        if k in fixed:
            out[k] = fixed[k]
        else:
            out[k] = cmap(n % 20)
            n += 2 if n < 18 else 1
    return out


def _draw_async(ax, events, pids, y_of) -> None:
    begins = {}
    bars = defaultdict(list)
    for e in events:
        if e["ph"] == "b" and e["pid"] in pids:
            begins[e["id"]] = e
        elif e["ph"] == "e" and e["id"] in begins:
            b = begins.pop(e["id"])
            row = (b["pid"], "wgmma" if b["cat"] in MMA_CATS else "copy")
            if row in y_of:
                bars[row].append((b["ts"], e["ts"] - b["ts"]))
    for row, items in bars.items():
        colour = "#6a3d9a" if row[1] == "wgmma" else "#1f78b4"
        ax.broken_barh(items, (y_of[row] - 0.3, 0.6), facecolors=colour, alpha=0.35, linewidth=0.3,
                       edgecolors=colour)


def _draw_instants(ax, events, pids, y_of) -> None:
    xs, ys, hx, hy, texts = [], [], [], [], []
    for e in events:
        if e["ph"] != "i" or e["pid"] not in pids or (e["pid"], e["tid"]) not in y_of:
            continue
        y = y_of[(e["pid"], e["tid"])]
        if e["cat"] == "banner":
            xs.append(e["ts"])
            ys.append(y - 0.42)
        elif e["cat"] == "hazard":
            hx.append(e["ts"])
            hy.append(y)
            texts.append(e["name"])
    ax.plot(xs, ys, linestyle="", marker="v", markersize=3, color="#555555")
    if hx:
        ax.plot(hx, hy, linestyle="", marker="X", markersize=7, color="#d62728")
        ax.annotate(texts[0], (hx[0], hy[0]), xytext=(-4, 0), textcoords="offset points", ha="right",
                    va="center", fontsize=7, color="#d62728")


def _draw_flows(ax, events, pids, y_of) -> None:
    """One arrow per completion and released group (the flow to its first warp)."""
    starts = {}
    seen = set()
    drawn = 0
    for e in events:
        if e["ph"] == "s":
            starts[e["id"]] = e
        elif e["ph"] == "f" and e["id"] in starts and drawn < MAX_FLOWS:
            s = starts.pop(e["id"])
            a, b = (s["pid"], s["tid"]), (e["pid"], e["tid"])
            once = (s["pid"], s["ts"], e["pid"], e["ts"])
            if a in y_of and b in y_of and once not in seen:
                seen.add(once)
                ax.annotate("", xy=(e["ts"], y_of[b]), xytext=(s["ts"], y_of[a]),
                            arrowprops={"arrowstyle": "->", "color": "#4477aa", "linewidth": 0.5, "alpha": 0.6})
                drawn += 1


def main(argv: list[str] | None = None) -> int:
    """python -m ptxgen.sim.trace_png run.json run.png [--cta X,Y,Z]: draw a trace written earlier."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m ptxgen.sim.trace_png", description=main.__doc__)
    ap.add_argument("trace", help="Chrome trace-event JSON written with trace= / --trace")
    ap.add_argument("png", help="picture to write")
    ap.add_argument("--cta", default=None, help="the CTA to draw, as X,Y,Z (default: the first traced one)")
    args = ap.parse_args(argv)
    cta = None if args.cta is None else tuple(int(v) for v in args.cta.split(","))
    draw(args.trace, args.png, cta=cta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
