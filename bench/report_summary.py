"""The one-screen summary that opens docs/benchmarks.md: what vaultsearch is, how good, how fast and
how big, each beside what a user could use instead, from the same results JSON as the rest of the page.

Every figure is read from ``bench/results/*.json`` (a stage that has not run leaves its line out
rather than inventing one); the run each figure comes from is dated in its own section below the
summary, and every target with its PASS/MISS is in the appendix.
"""

from __future__ import annotations

from statistics import mean
from typing import Any

KNOWN_ITEM = {"dendron": "Dendron docs, headings", "powershell": "PowerShell docs, headings"}
ABOUT = {"scifact": "SciFact, natural-language claims", **KNOWN_ITEM}


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def quality_rows(results: dict[str, dict[str, Any]]) -> list[str]:
    """nDCG@10 per corpus: vaultsearch without a model (fts, hybrid), with one (auto), and the baselines."""
    search = results.get("search")
    if not search:
        return []
    rows = [
        "| query set (dev) | notes | vaultsearch `fts` | `hybrid` | with a model (`auto`) | bare FTS5 | bm25s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, corpus in search["corpora"].items():
        ndcg = {m["mode"]: m["ndcg"] for m in corpus["quality"]["modes"]}
        dense = results.get(f"dense_quality_{name}", {}).get("dev", {}).get("auto", {}).get("ndcg@10")
        rows.append(
            f"| {ABOUT.get(name, name)} | {corpus['notes']:,} | **{_f(ndcg.get('fts'))}** | {_f(ndcg.get('hybrid'))} "
            f"| {_f(dense)} | {_f(ndcg.get('bare_fts5'))} | {_f(ndcg.get('bm25s'))} |"
        )
    return rows


def language_line(results: dict[str, dict[str, Any]]) -> list[str]:
    """Mean nDCG@10 and no-hit share over every multilingual/known-item query set the sets stage ran."""
    sets = results.get("lang", {}).get("sets")
    if not sets:
        return []
    cells: dict[str, list[tuple[float, float]]] = {"now": [], "fts5-trigram": [], "bm25s": []}
    corpora = [name for name in sets if name.startswith("mdn-")]
    for name in corpora:
        for engines in sets[name].values():
            if not isinstance(engines, dict) or "now" not in engines:
                continue
            for engine, got in cells.items():
                if engine in engines:
                    got.append((engines[engine]["ndcg10"], engines[engine]["nohit"]))
    if not cells["now"]:
        return []

    def said(engine: str) -> str:
        pairs = cells[engine]
        return f"{mean(p[0] for p in pairs):.3f} ({mean(p[1] for p in pairs):.0%} without a hit)"

    languages = ", ".join(name.removeprefix("mdn-") for name in corpora)
    return [
        f"In {len(corpora)} languages ({languages}; MDN's JavaScript docs, {len(cells['now'])} query sets of",
        "titles, headings, word forms, CJK substrings and half-typed words), mean nDCG@10: vaultsearch",
        f"{said('now')}, SQLite FTS5 trigram {said('fts5-trigram')}, bm25s {said('bm25s')}.",
    ]


def speed_rows(results: dict[str, dict[str, Any]]) -> list[str]:
    """Latency and build time, each beside the baselines where the same run measured them."""
    rows = ["| how fast | vaultsearch | bare FTS5 | bm25s |", "|---|---:|---:|---:|"]
    search = results.get("search", {}).get("corpora", {})
    if "scifact" in search:
        lat = search["scifact"]["latency"]["engines"]
        rows.append(
            "| a search in a running process (SciFact, 5,183 notes, p50) "
            f"| {_ms(lat.get('fts', {}).get('p50_ms'))} | {_ms(lat.get('bare_fts5', {}).get('p50_ms'))} "
            f"| {_ms(lat.get('bm25s', {}).get('p50_ms'))} |"
        )
    cold = results.get("coldstart")
    if cold:
        engines = cold["engines"]
        mine = engines.get("vaultsearch fts (after)", engines.get("vaultsearch fts", {})).get("median_s")
        theirs = engines.get("bm25s", {}).get("median_s")
        rows.append(
            f"| a new process's first search, whole process ({cold['notes']:,} notes) "
            f"| {_ms(None if mine is None else mine * 1000)} | - | {_ms(None if theirs is None else theirs * 1000)} |"
        )
    scale = results.get("scale", {}).get("targets", {})
    if "fts_p50" in scale and scale["fts_p50"]["value"] is not None:
        rows.append(
            f"| a search at {scale['fts_p50']['size']:,} notes (p50) | {_ms(scale['fts_p50']['value'])} | - | - |"
        )
    serve = results.get("serve", {}).get("targets", {})
    http = serve.get("http search fts p50", {}).get("value")
    stdio = serve.get("stdio search fts p50", {}).get("value")
    if http is not None or stdio is not None:
        rows.append(f"| an agent's search over HTTP / MCP stdio (p50) | {_ms(http)} / {_ms(stdio)} | - | - |")
    watched = results.get("serve", {}).get("watch_scale")
    if watched:
        rows.append(
            f"| an edit searchable through `serve --watch` ({watched['notes']:,} notes, p95) "
            f"| {_ms(watched['edit_to_searchable']['p95_ms'])} | - | - |"
        )
    build = results.get("build", {}).get("corpora", {})
    if "powershell" in build:
        ps = build["powershell"]
        rows.append(
            f"| a cold build (PowerShell docs, {ps['notes']:,} notes, {ps['vault_bytes'] / 2**20:.0f} MiB) "
            f"| {ps['cold']['wall_seconds']:.1f} s | {ps['bare_fts5']['median_seconds']:.1f} s | - |"
        )
    return rows if len(rows) > 2 else []


def _written(n: float) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def size_line(results: dict[str, dict[str, Any]]) -> list[str]:
    """Index bytes against the notes' bytes, and what a one-note edit costs: from the edit bench (tantivy
    beside it, same run) when it ran (its latest run, ``edit_now``, over issue 29's baseline, ``edit``), else
    from the build stage."""
    latest = results.get("edit_now", {}).get("corpora", {})
    edit = latest or results.get("edit", {}).get("corpora", {})
    if edit:
        parts, edits = [], []
        for name, c in edit.items():
            mine, theirs = c["vaultsearch"], c.get("tantivy", {})
            tantivy = f" (tantivy {theirs['index_over_markdown']:.2f}x)" if theirs else ""
            parts.append(f"{name} {mine['index_over_markdown']:.1f}x{tantivy}")
            edits.append(
                f"{name} {mine['median_wall_seconds']:.1f} s and {_written(mine['median_walk_bytes'])} written"
                + (
                    f" (tantivy {theirs['median_wall_seconds'] * 1000:.0f} ms, {theirs['median_walk_bytes'] / 1024:.0f} KiB)"
                    if theirs
                    else ""
                )
            )
        if latest:
            date = str(results["edit_now"].get("machine", {}).get("date", "?"))[:10]
            tail = (
                f"A one-note edit writes a small segment and a tombstone (immutable segments, as Lucene and tantivy "
                f"do: issue 29); measured {date}."
            )
        else:
            tail = (
                "Making both cost what changed is the work in progress (immutable segments, as Lucene and tantivy do)."
            )
        return [
            f"What it costs on disk: the index folder (two generations kept) is {', '.join(parts)} the notes' size.",
            f"A one-note edit, `vaultsearch index` as a new process: {'; '.join(edits)}.",
            tail,
        ]
    build = results.get("build", {}).get("corpora", {})
    parts = [
        f"{name} {c['index_dir_bytes'] / c['vault_bytes']:.1f}x"
        for name, c in build.items()
        if c.get("vault_bytes") and c.get("index_dir_bytes")
    ]
    if not parts:
        return []
    return [
        f"What it costs on disk: the index folder (two generations kept) is {', '.join(parts)} the notes' size;",
        "a one-note edit rebuilds a whole generation (see *Scaling*). Shrinking both is the work in progress",
        "(immutable segments, as Lucene and tantivy do).",
    ]


def missed_line(target_rows: list[tuple[str, str, str, str]]) -> list[str]:
    """How many targets pass, and the ones that do not, by name (the appendix has them all)."""
    if not target_rows:
        return []
    missed = [f"{area}: {target} ({measured})" for area, target, measured, status in target_rows if status != "PASS"]
    head = f"{len(target_rows) - len(missed)} of {len(target_rows)} targets pass (appendix)."
    return [head + (" Missed:" if missed else ""), *[f"- {m}" for m in missed]]


def summary_section(results: dict[str, dict[str, Any]], target_rows: list[tuple[str, str, str, str]]) -> list[str]:
    """The page's first section: one screen a user reads before deciding."""
    out = [
        "## In one screen",
        "",
        "vaultsearch searches a folder of Markdown notes from a terminal, a notebook, a browser tab or an",
        "agent (MCP, HTTP) through a verified local index: questions, titles, headings, half-typed words",
        "and typos, filtered before ranking. Below, on real text nobody here wrote, it is set beside what a",
        "user could use instead: a bare SQLite FTS5 table and bm25s. nDCG@10 (1.0 = the right notes first):",
        "",
    ]
    quality = quality_rows(results)
    if quality:
        out += [*quality, ""]
    if language := language_line(results):
        out += [*language, ""]
    if speed := speed_rows(results):
        out += [*speed, ""]
    if size := size_line(results):
        out += [*size, ""]
    if missed := missed_line(target_rows):
        out += [*missed, ""]
    return out


def test_suite_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """``./run test`` (what CI runs) before and after, from ``bench/results/test_suite.json``."""
    suite = results.get("test_suite")
    if not suite:
        return []
    out = [
        "## The test suite (`./run test`)",
        "",
        f"{suite['command']}; {suite['machine']}. Memory: the machine's used memory at its peak less before the run.",
        "",
        "| run | tree | tests | extras | wall | largest process | used memory at the peak |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for name, r in suite["runs"].items():
        used = r["system_used_peak_mib"] - r["system_used_idle_mib"]
        out.append(
            f"| {name} | {r['tree']} | {r['tests']:,} | {r['extras']} | {r['wall_s'] / 60:.1f} min "
            f"| {r['max_process_rss_mib']:,.0f} MiB | {used:,} MiB |"
        )
    return [*out, ""]
