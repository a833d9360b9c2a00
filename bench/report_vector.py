"""The "`vector` without idf in its stored numbers" part of docs/benchmarks.md, from
``bench/results/vector_norm.json`` (``python -m bench.bench_vector_norm``): per query set, nDCG@10 of
`vector` and `hybrid` with the old norm (idf inside each chunk's pivoted norm) and the variant core
ships, then the mean over the sets of every variant tried."""

from __future__ import annotations

from statistics import mean
from typing import Any


def _sets(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{corpus} {name}", r)
        for corpus, sets in report["ndcg10"].items()
        for name, r in sets.items()
        if name != "check"
    ]


def vector_norm_section(results: dict[str, dict[str, Any]]) -> list[str]:
    report = results.get("vector_norm")
    if not report:
        return []
    core, sets = report["core_variant"], _sets(report)
    out = [
        "## `vector` with no idf in its stored numbers",
        "",
        "Since schema 12 a chunk stores only its own term counts and length; idf and the mean chunk length",
        "come from the generation when it is loaded (BM25 over chunks, idf^1.5 on the query side), so one",
        f"edited note changes no other chunk's stored numbers. `{core}` is what core ships; `today` the",
        "pivoted TF-IDF cosine it replaced. nDCG@10 per dev/train set (core checked equal to the bench's",
        "variant on every search):",
        "",
        "    python -m bench.bench_vector_norm --check --modes vector,hybrid,graph_assisted",
        "",
        "| set | n | vector today | vector now | hybrid today | hybrid now |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in sets:
        v, h = r["vector"], r["hybrid"]
        out.append(
            f"| {name} | {r['n']} | {v['today']:.4f} | {v[core]:.4f} ({v[core] - v['today']:+.4f}) "
            f"| {h['today']:.4f} | {h[core]:.4f} ({h[core] - h['today']:+.4f}) |"
        )
    out += ["", "Every variant tried, mean nDCG@10 over the sets above and its worst change against today:", ""]
    out += ["| variant | vector mean | vector worst | hybrid mean | hybrid worst |", "|---|---:|---:|---:|---:|"]
    for variant in report["variants"]:
        cells = []
        for mode in ("vector", "hybrid"):
            values = [r[mode][variant] for _, r in sets]
            worst = min(r[mode][variant] - r[mode]["today"] for _, r in sets)
            cells += [f"{mean(values):.4f}", "-" if variant == "today" else f"{worst:+.4f}"]
        label = f"**{variant}** (core)" if variant == core else variant
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return [*out, ""]
