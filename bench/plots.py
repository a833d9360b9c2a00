"""Plots of the benchmark results (matplotlib, Agg backend): PNGs in bench/results/.

* ``latency_vs_size.png``: warm limit=10 p50 latency per model-free mode and per baseline
  against the synthetic vault size, log-log (from ``scale.json``);
* ``build_vs_size.png``: cold build seconds of vaultsearch and the baselines against size;
* ``quality_ndcg.png``: nDCG@10 per mode and baseline, one panel per corpus (from
  ``search.json``); a mode that did not run gets an empty slot labelled with why.

Each function takes the loaded JSON and an output path and returns the path, so the
report can embed exactly what was drawn. ``python -m bench.plots`` redraws all from the
JSON files present.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from bench.common import RESULTS_DIR  # noqa: E402

BASELINE_STYLE = {
    "bare_fts5": dict(color="black", linestyle="--", marker="s"),
    "bm25s": dict(color="grey", linestyle=":", marker="^"),
}
BASELINES = ("bare_fts5", "bm25s")


def _sizes_done(scale: dict[str, Any]) -> list[int]:
    return sorted(int(n) for n in scale["sizes"])


def latency_series(scale: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """engine -> [(notes, p50 ms)] over the sizes where that engine has a number."""
    series: dict[str, list[tuple[int, float]]] = {}
    for n in _sizes_done(scale):
        res = scale["sizes"][str(n)]
        for mode, stats in res.get("search", {}).get("modes", {}).items():
            series.setdefault(mode, []).append((n, stats["p50_ms"]))
        for name, stats in res.get("baselines", {}).items():
            series.setdefault(name, []).append((n, stats["p50_ms"]))
    return series


def plot_latency_vs_size(scale: dict[str, Any], out: Path) -> Path:
    """Log-log p50 latency per mode (solid) and baseline (dashed) against vault size."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for name, points in latency_series(scale).items():
        xs, ys = zip(*points)
        style = BASELINE_STYLE.get(name, dict(marker="o"))
        ax.plot(xs, ys, label=name, **style)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("notes in the synthetic vault")
    ax.set_ylabel(f"p50 latency, ms (warm, limit={scale['limit']})")
    ax.set_title("Query latency vs vault size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_build_vs_size(scale: dict[str, Any], out: Path) -> Path:
    """Log-log cold build seconds of vaultsearch (finished builds only) and the baselines."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    series: dict[str, list[tuple[int, float]]] = {}
    for n in _sizes_done(scale):
        res = scale["sizes"][str(n)]
        if res["build"].get("finished"):
            series.setdefault("vaultsearch (full text)", []).append((n, res["build"]["wall_seconds"]))
        for name, stats in res.get("baselines", {}).items():
            series.setdefault(name, []).append((n, stats["build_seconds"]))
    for name, points in series.items():
        xs, ys = zip(*points)
        ax.plot(xs, ys, label=name, **BASELINE_STYLE.get(name, dict(marker="o")))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("notes in the synthetic vault")
    ax.set_ylabel("cold build, s")
    ax.set_title("Cold build time vs vault size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def quality_bars(corpus: dict[str, Any]) -> list[tuple[str, float | None, str | None]]:
    """(engine, nDCG@10 or None, why it has none) in evaluation order for one corpus."""
    rows = []
    for m in corpus["quality"]["modes"]:
        rows.append((m["mode"], m["ndcg"], None if m["error_reason"] is None else m["error_reason"]))
    return rows


def plot_quality(search: dict[str, Any], out: Path) -> Path:
    """nDCG@10 bars per engine, one panel per corpus; baselines grey, modes coloured."""
    from bench.report import corpus_order

    names = [name for name, _c in corpus_order(search["corpora"])]
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4.4), sharey=True, squeeze=False)
    for ax, name in zip(axes[0], names):
        rows = quality_bars(search["corpora"][name])
        labels = [r[0] for r in rows]
        values = [r[1] or 0.0 for r in rows]
        colors = ["0.55" if r[0] in BASELINES else f"C{i}" for i, r in enumerate(rows)]
        bars = ax.bar(range(len(rows)), values, color=colors)
        for bar, (_label, value, why) in zip(bars, rows):
            text = f"{value:.3f}" if value is not None else f"not run\n({why})"
            ax.text(
                bar.get_x() + bar.get_width() / 2,
                (value or 0.0) + 0.01,
                text,
                ha="center",
                va="bottom",
                fontsize=6,
                rotation=90,
            )
        ax.set_xticks(range(len(rows)), labels, rotation=45, ha="right", fontsize=8)
        ax.set_title(name)
        ax.set_ylim(0, 1.15)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("nDCG@10 (dev)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def draw_all(results_dir: Path = RESULTS_DIR) -> list[Path]:
    """Every plot whose input JSON exists in ``results_dir``; returns the PNGs written."""
    written = []
    scale_path, search_path = results_dir / "scale.json", results_dir / "search.json"
    if scale_path.is_file():
        scale = json.loads(scale_path.read_text(encoding="utf-8"))
        written.append(plot_latency_vs_size(scale, results_dir / "latency_vs_size.png"))
        written.append(plot_build_vs_size(scale, results_dir / "build_vs_size.png"))
    if search_path.is_file():
        search = json.loads(search_path.read_text(encoding="utf-8"))
        written.append(plot_quality(search, results_dir / "quality_ndcg.png"))
    return written


if __name__ == "__main__":
    for path in draw_all():
        print(f"wrote {path}")
