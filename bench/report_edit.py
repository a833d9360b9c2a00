"""The "one-note edit" part of docs/benchmarks.md, from ``bench/results/edit.json``
(``python -m bench.bench_edit``): per corpus, ``vaultsearch index`` after a one-note edit as a whole
process, the bytes it wrote to the index directory, the index's size on disk with two generations
retained against the Markdown bytes, and tantivy's delete + add + commit + reload of the same note."""

from __future__ import annotations

from typing import Any


def _bytes(n: float | None) -> str:
    """A byte count for a table cell: ``-`` when absent, else B / KiB / MiB / GiB."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.2f} GiB"


def _row(name: str, corpus: dict[str, Any]) -> list[str]:
    vs, tv = corpus["vaultsearch"], corpus["tantivy"]
    return [
        f"| {name} | {corpus['notes']:,} | {_bytes(corpus['markdown_bytes'])} "
        f"| {vs['median_wall_seconds']:.2f} s | {_bytes(vs['median_walk_bytes'])} "
        f"| {_bytes(vs.get('median_proc_write_bytes'))} | {_bytes(vs.get('median_proc_wchar'))} "
        f"| {_bytes(vs['index_bytes'])} ({vs['index_over_markdown']:.2f}x) "
        f"| {tv['median_wall_seconds'] * 1000:.1f} ms | {_bytes(tv['median_walk_bytes'])} "
        f"| {_bytes(tv['index_bytes'])} ({tv['index_over_markdown']:.2f}x) |"
    ]


def edit_section(results: dict[str, dict[str, Any]]) -> list[str]:
    data = results.get("edit")
    if not data:
        return []
    machine = data.get("machine", {})
    out = [
        "## One-note edit: what it costs the index (issue 29's baseline)",
        "",
        f"One line appended to a mid-sized note, median of {data['edits_per_corpus']} edits (a different note",
        "each time). `vaultsearch index` is a whole new process (interpreter start-up included). *Walk* is",
        "the bytes of the files under the index directory that are new or changed (size, mtime or inode)",
        "after the edit, each counted whole; *write_bytes* and *wchar* are the process's own /proc/self/io",
        "counters (bytes sent to storage, and bytes passed to write calls), its worker processes included.",
        "The index on disk holds two generations (the default keep=2). tantivy indexes the same notes",
        "(title + body) and times delete + add + commit + reader reload of the edited note.",
        "",
        "    python -m bench.bench_edit",
        "",
        "| corpus | notes | Markdown | vaultsearch index | walk | write_bytes | wchar | index on disk "
        "| tantivy edit | tantivy walk | tantivy index |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, corpus in data["corpora"].items():
        out += _row(name, corpus)
    load = (data.get("load_avg_before") or [None])[0], (data.get("load_avg_after") or [None])[0]
    out += [
        "",
        f"Measured {machine.get('date', '?')} on {machine.get('cores', '?')} cores, load average (1 min) "
        f"{load[0]} before and {load[1]} after.",
        "",
    ]
    return out
