"""Issue 29's later sections of docs/benchmarks.md: the one-note edit on stop 33's code
(``bench/results/edit_stop33.json``, rendered by ``bench.report_edit.edit_section``), merges
(``bench/results/merge.json``, ``python -m bench.bench_merge``) and quality before and after the segments
work (``bench/results/quality_segments*.json``, ``python -m bench.bench_quality_segments``)."""

from __future__ import annotations

from typing import Any

STOP33_HEADING = "One-note edit with kept ids, an O(change) publish and the text store (issue 29)"
STOP33_INTRO = (
    "The same bench on later code: an edited note keeps its id (a content edit of a linked note publishes "
    "a delta), no whole-generation array work on a delta publish, compact tombstones, note text with a "
    "per-segment preset dictionary and heading paths stored once, a tiered merge policy. The plan still "
    "runs on a scratch working database (O(base)). "
    "`python -m bench.bench_edit --corpus scifact,powershell,dendron --out bench/results/edit_stop33.json`"
)

STOP34_HEADING = "One-note edit with postings stored once (issue 29, stop 34)"
STOP34_INTRO = (
    "The same bench on stop 34's code: each posting list is stored once (term-major; the forward rows a "
    "build works on are TEMP tables derived from the arrays, schema 22), on the PowerShell docs, SciFact "
    "and a 100,000-note synthetic vault (bench/synth.py). The machine was shared (load averages in each row's "
    "JSON). `python -m bench.bench_edit --corpus scifact,powershell --sizes 100000 "
    "--out bench/results/edit_stop34.json`"
)


def _mb(n: float | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f} MB"


def merge_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Policy merge and merge-into-one after a run of one-note edits (``bench/results/merge.json``)."""
    data = results.get("merge")
    if not data or not data.get("runs"):
        return []
    machine = data.get("machine", {})
    out = [
        "## Merges (issue 29)",
        "",
        "One-note edits, each a delta build, then `vaultsearch index --optimize` (the tiered policy) and",
        "`--optimize --one-segment`; answers compared before and after each merge.",
        "",
        "    python -m bench.bench_merge --corpus scifact --edits 12",
        "",
        "| corpus | notes | edits | merge | segments | seconds | written | parts before -> after | answers |",
        "|---|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for run in data["runs"]:
        identical = run.get("results_identical", {})
        for label, key, same_key in (
            ("policy", "policy_merge", "policy"),
            ("all into one", "one_segment_merge", "one_segment"),
        ):
            m = run.get(key)
            if not m:
                continue
            same = identical.get(same_key)
            out.append(
                f"| {run['corpus']} | {run['notes']:,} | {len(run.get('edits', []))} | {label} "
                f"| {m['segments_before']} -> {m['segments_after']} | {m['seconds']:.2f} | {_mb(m['bytes_written'])} "
                f"| {_mb(m['bytes_before'])} -> {_mb(m['bytes_after'])} | {'identical' if same is True else 'not compared' if same is None else 'DIFFER'} |"
            )
    out += [
        "",
        f"Measured {machine.get('date', '?')} on {machine.get('cores', '?')} cores, load average "
        f"{machine.get('load_avg_1m', '?')} (1 min).",
        "",
    ]
    return out


def _gaps(sets: dict[str, Any]) -> tuple[float | None, float]:
    before, seg = None, 0.0
    for modes in sets.values():
        for runs in modes.values():
            if "before" in runs:
                gap = abs(runs["now"]["ndcg10"] - runs["before"]["ndcg10"])
                before = gap if before is None else max(before, gap)
            seg = max(seg, abs(runs["now_segmented"]["ndcg10"] - runs["now"]["ndcg10"]))
    return before, seg


def quality_segments_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """nDCG@10 per set and mode: before issue 29's storage work, now cold, now after incremental edits."""
    keys = sorted(k for k in results if k.startswith("quality_segments"))
    if not keys:
        return []
    out = [
        "## Quality before and after the segments work (issue 29)",
        "",
        "nDCG@10 of fts, vector, hybrid and graph_assisted on every set: *before* is the code before issue",
        "29's storage work (b372bc0), *now* a cold index of this code, *segmented* this code on a copy of the",
        "vault indexed then edited in 4 incremental builds (3% of the notes appended to, 3% deleted, 3% more",
        "appended to, then all restored) that end at the same notes: a generation of several segments with",
        "tombstones, or one segment where a build fell back. The bar: now within 0.005 of before on every set",
        "and mode; segmented equal to now.",
        "",
        "    python -m bench.bench_quality_segments --code before=<checkout of b372bc0> [--corpus ...]",
        "",
    ]
    for key in keys:
        data = results[key]
        note = f" {data['note']}" if data.get("note") else ""
        out += [f"`bench/results/{key}.json`, run {data.get('machine', {}).get('date', '?')}.{note}", ""]
        out += [
            "| corpus | set | mode | before | now | segmented |",
            "|---|---|---|---:|---:|---:|",
        ]
        summary = []
        for corpus, entry in data["corpora"].items():
            for name, modes in entry["sets"].items():
                for mode, runs in modes.items():
                    b = runs.get("before", {}).get("ndcg10")
                    out.append(
                        f"| {corpus} | {name} | {mode} | {'-' if b is None else f'{b:.4f}'} "
                        f"| {runs['now']['ndcg10']:.4f} | {runs['now_segmented']['ndcg10']:.4f} |"
                    )
            before, seg = _gaps(entry["sets"])
            parts = entry["generation"]["now_segmented"]["parts"]
            summary.append(
                f"{corpus}: largest |now - before| {'-' if before is None else f'{before:.4f}'}, "
                f"|segmented - now| {seg:.4f} ({parts.get('segments', '?')} segments, "
                f"{parts.get('tombstones', '?')} tombstones)"
            )
        out += ["", *(f"- {line}" for line in summary), ""]
    return out
