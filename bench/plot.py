"""Plot a bench/gemm.py results file: TFLOP/s per problem, one line per system, one panel per dtype.

    python3 bench/plot.py bench/results/2026-01-01-nvidia-h100-80gb-hbm3.json -o chart.png

Needs matplotlib (a bench-only extra: `pip install matplotlib`); runs on any machine.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SYSTEMS = ("ptxgen", "cublas", "triton")
STYLE = {"ptxgen": ("tab:red", "o"), "cublas": ("tab:blue", "s"), "triton": ("tab:green", "^")}


def series(result: dict) -> dict[str, tuple[list[str], dict[str, list[float | None]]]]:
    """dtype -> (problem labels in run order, system -> TFLOP/s or None per problem)."""
    out: dict[str, tuple[list[str], dict[str, list[float | None]]]] = {}
    for row in result["rows"]:
        labels, by_sys = out.setdefault(row["dtype"], ([], {s: [] for s in SYSTEMS}))
        label = f"{row['m']}x{row['n']}x{row['k']}"
        if label not in labels:
            labels.append(label)
            for s in SYSTEMS:
                by_sys[s].append(None)
        if row["system"] in by_sys:
            by_sys[row["system"]][labels.index(label)] = row.get("tflops")
    return out


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(result)
    fig, axes = plt.subplots(len(data), 1, figsize=(max(8, 0.45 * max(len(v[0]) for v in data.values())),
                                                    4.2 * len(data)), squeeze=False)
    peak = result.get("peak_tflops")
    for ax, (dtype, (labels, by_sys)) in zip(axes[:, 0], data.items()):
        xs = list(range(len(labels)))
        for s in SYSTEMS:
            ys = [float("nan") if v is None else v for v in by_sys[s]]
            if all(v != v for v in ys):
                continue
            color, marker = STYLE[s]
            ax.plot(xs, ys, marker=marker, color=color, label=s)
        if peak:
            ax.axhline(peak, color="gray", linestyle="--", linewidth=0.8, label=f"dense peak {peak:g}")
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{dtype} inputs, f32 accumulation — {result.get('device', '?')} ({result.get('date', '')})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("-o", "--out", type=Path, default=None, help="image path (default: beside the JSON)")
    args = ap.parse_args(argv)
    result = json.loads(args.results.read_text())
    out = args.out or args.results.with_suffix(".png")
    plot(result, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
