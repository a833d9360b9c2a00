"""The "one-note edit" part of docs/benchmarks.md, from ``bench/results/edit.json``
(``python -m bench.bench_edit``): per corpus, ``vaultsearch index`` after a one-note edit as a whole
process, the bytes it wrote to the index directory, the index's size on disk with two generations
retained against the Markdown bytes, tantivy's delete + add + commit + reload of the same note and
bm25s's full re-index + save; then the index-size table of every corpus. The watcher's
edit-to-searchable (``bench/results/watch.json``, ``python -m bench.bench_watch``) follows."""

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


def _bm25s_cells(bm: dict[str, Any] | None) -> str:
    if not bm:
        return "| - | - |"
    return f"| {bm['median_wall_seconds']:.2f} s | {_bytes(bm['median_walk_bytes'])} |"


def _row(name: str, corpus: dict[str, Any]) -> list[str]:
    vs, tv = corpus["vaultsearch"], corpus["tantivy"]
    return [
        f"| {name} | {corpus['notes']:,} | {_bytes(corpus['markdown_bytes'])} "
        f"| {vs['median_wall_seconds']:.2f} s | {_bytes(vs['median_walk_bytes'])} "
        f"| {_bytes(vs.get('median_proc_write_bytes'))} | {_bytes(vs.get('median_proc_wchar'))} "
        f"| {_bytes(vs['index_bytes'])} ({vs['index_over_markdown']:.2f}x) "
        f"| {tv['median_wall_seconds'] * 1000:.1f} ms | {_bytes(tv['median_walk_bytes'])} "
        f"| {_bytes(tv['index_bytes'])} ({tv['index_over_markdown']:.2f}x) " + _bm25s_cells(corpus.get("bm25s"))
    ]


def _size_cell(entry: dict[str, Any] | None) -> str:
    return "-" if not entry else f"{_bytes(entry['bytes'])} ({entry['over_markdown']:.2f}x)"


def size_rows(corpora: dict[str, Any]) -> list[str]:
    """The index-size table: every corpus's bytes on disk per engine, against its Markdown bytes."""
    rows = []
    for name, corpus in corpora.items():
        sizes = corpus.get("index_sizes")
        if not sizes:
            continue
        rows.append(
            f"| {name} | {corpus['notes']:,} | {_bytes(sizes['markdown_bytes'])} "
            f"| {_size_cell(sizes.get('vaultsearch'))} | {_size_cell(sizes.get('vaultsearch_one_generation'))} "
            f"| {_size_cell(sizes.get('tantivy'))} | {_size_cell(sizes.get('bm25s'))} |"
        )
    if not rows:
        return []
    return [
        "Index bytes on disk against the Markdown bytes (issue 29's target: <= 2x with two generations",
        "retained). *one generation* is the active generation's file alone.",
        "",
        "| corpus | notes | Markdown | vaultsearch (two generations) | one generation | tantivy | bm25s |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]


def _load_text(data: dict[str, Any]) -> str:
    """The run's 1-minute load before and after, and each corpus's where the result has them."""
    load = (data.get("load_avg_before") or [None])[0], (data.get("load_avg_after") or [None])[0]
    per = [
        f"{name} {c['load_avg_1m']['before']}-{c['load_avg_1m']['after']}"
        for name, c in data.get("corpora", {}).items()
        if c.get("load_avg_1m")
    ]
    return f"load average (1 min) {load[0]} before and {load[1]} after" + (
        f" (per corpus, before-after: {', '.join(per)})" if per else ""
    )


BASELINE_HEADING = "One-note edit: what it costs the index (issue 29's baseline)"


def edit_section(
    results: dict[str, dict[str, Any]], key: str = "edit", heading: str = BASELINE_HEADING, intro: str = ""
) -> list[str]:
    """The edit table of ``results[key]`` (a bench_edit JSON) under ``heading``; ``intro``: a paragraph first."""
    data = results.get(key)
    if not data:
        return []
    machine = data.get("machine", {})
    out = [
        f"## {heading}",
        "",
        *([intro, ""] if intro else []),
        f"One line appended to a mid-sized note, median of {data['edits_per_corpus']} edits (a different note",
        "each time). `vaultsearch index` is a whole new process (interpreter start-up included). *Walk* is",
        "the bytes of the files under the index directory that are new or changed (size, mtime or inode)",
        "after the edit, each counted whole; *write_bytes* and *wchar* are the process's own /proc/self/io",
        "counters (bytes sent to storage, and bytes passed to write calls), its worker processes included.",
        "The index on disk holds two generations (the default keep=2). tantivy indexes the same notes",
        "(title + body) and times delete + add + commit + reader reload of the edited note. bm25s has no",
        "update: its cost for one edit is its whole write path (read, tokenize, index, save), in-process.",
        "The multilingual MDN corpus is its seven language folders as one vault.",
        "",
        "    python -m bench.bench_edit --sizes 10000",
        "",
        "| corpus | notes | Markdown | vaultsearch index | walk | write_bytes | wchar | index on disk "
        "| tantivy edit | tantivy walk | tantivy index | bm25s re-index + save | bm25s walk |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, corpus in data["corpora"].items():
        out += _row(name, corpus)
    out += ["", *size_rows(data["corpora"])]
    out += [
        f"Measured {machine.get('date', '?')} on {machine.get('cores', '?')} cores (shared with other work), "
        f"{_load_text(data)}.",
        "",
    ]
    return out


def _watch_row(name: str, corpus: dict[str, Any]) -> str:
    e, b = corpus["edit_to_searchable"], corpus["build_seconds"]
    walk, wb = corpus.get("walk_bytes") or {}, corpus.get("proc_write_bytes") or {}
    return (
        f"| {name} | {corpus['notes']:,} | {_bytes(corpus['markdown_bytes'])} | {e['n']} "
        f"| {e['p50_s']:.2f} s | {e['p95_s']:.2f} s | {e['max_s']:.2f} s | {b['p50_s']:.2f} s "
        f"| {_bytes(walk.get('median'))} | {_bytes(wb.get('median'))} |"
    )


def watch_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Edit-to-searchable through a running ``vaultsearch watch`` (``bench/results/watch.json``)."""
    data = results.get("watch")
    if not data or not data.get("corpora"):
        return []
    machine = data.get("machine", {})
    out = [
        "## One-note edit through a running watcher: edit to searchable (issue 29's baseline)",
        "",
        "`vaultsearch watch VAULT` runs as its own process; the bench process is a long-lived reader",
        "(`search_vault`, fts, freshness on). Each edit appends a line holding a new word to a different",
        f"mid-sized note; the reader polls every {data.get('poll_ms', 20):g} ms until the note is a hit for that word.",
        "*Build* is the watcher's own build time; *walk* the bytes of new or changed files under the index",
        "directory per edit (each counted whole); *write_bytes* the watcher process's /proc/PID/io counter.",
        "",
        "    python -m bench.bench_watch --sizes 10000",
        "",
        "| corpus | notes | Markdown | edits | p50 | p95 | max | build p50 | walk per edit | write_bytes per edit |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(_watch_row(name, corpus) for name, corpus in data["corpora"].items()),
        "",
        f"Measured {machine.get('date', '?')} on {machine.get('cores', '?')} cores (shared with other work), "
        f"{_load_text(data)}.",
        "",
    ]
    return out
