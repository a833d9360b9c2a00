"""Issue 29's sections of docs/benchmarks.md for the stop after 34: the one-note edit at 100k notes on a built
copy (``bench/results/edit_100k_s35.json``, ``python -m bench.bench_edit --reuse``), edits that move other
notes' links (``bench/results/link_edit.json``, ``python -m bench.bench_link_edit``) and cold builds of the code
before the storage work and now, back to back (``bench/results/cold_ab.json``, ``python -m bench.bench_cold_ab``).
Each section is absent when its JSON is."""

from __future__ import annotations

from typing import Any

from bench.report_edit import _bytes

STEP_ORDER = ("scan", "plan", "write", "relink", "links", "validate", "publish")


def _load(data: dict[str, Any]) -> str:
    before, after = (data.get("load_avg_before") or ["?"])[0], (data.get("load_avg_after") or ["?"])[0]
    return f"1-minute load {before} before and {after} after"


EDIT_100K_RUNS = ("edit_100k_s35", "edit_100k_final", "edit_100k_view", "edit_100k_s38_before", "edit_100k_s38")


def _edit_row(label: str, run: dict[str, Any]) -> str:
    return (
        f"| {label} | {run['wall_seconds']:.2f} s | {run['cpu_seconds']:.2f} s | {run['in_process_seconds']:.2f} s "
        f"| {_bytes(run.get('proc_write_bytes'))} | {_bytes(run.get('walk_bytes'))} |"
    )


def edit_100k_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """The one-note edit on a built 100k-note vault, per run (``EDIT_100K_RUNS``): the median of the edits
    after the first, the first, and the in-process steps."""
    runs = [(key, results[key]) for key in EDIT_100K_RUNS if results.get(key)]
    if not runs:
        return []
    out = [
        "## One-note edit at 100k notes: no second walk, rows read once, linked notes in the delta (issue 29)",
        "",
        "One line appended to a different mid-sized note of a built 100,000-note synthetic vault (bench/synth.py),",
        "then `vaultsearch index VAULT --json` as a new process: its wall time (interpreter start-up included),",
        "its CPU seconds (user + system from `getrusage`: what the machine's load inflates least), the bytes it",
        "wrote (`/proc/self/io`) and the bytes of new or changed files under the index directory. The first edit",
        "after copying the vault hashes the parts once (new inodes) and is reported apart. Target: <= 1.5 s wall.",
        "",
        "    python -m bench.bench_edit --reuse VAULT --edits 6 --out bench/results/edit_100k_final.json",
        "",
        "| run | wall | CPU | in process | written (process) | written (index dir) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for key, data in runs:
        label = data.get("label", key)
        median = {
            "wall_seconds": data["median_wall_seconds"],
            "cpu_seconds": data["median_cpu_seconds"],
            "in_process_seconds": data["median_in_process_seconds"],
            "proc_write_bytes": data.get("median_proc_write_bytes"),
            "walk_bytes": data.get("median_walk_bytes"),
        }
        out.append(_edit_row(f"{label}: median of {max(len(data.get('edits') or []) - 1, 0)} edits", median))
        first = data.get("first")
        if first:
            out.append(
                _edit_row(f"{label}: first edit", {**first, "walk_bytes": (first.get("walk") or {}).get("bytes")})
            )
        steps = data.get("median_steps") or {}
        named = [s for s in STEP_ORDER if s in steps] + sorted(set(steps) - set(STEP_ORDER))
        notes.append(
            f"- {label}: measured {data.get('machine', {}).get('date', '?')[:16]}, {_load(data)}; in-process steps "
            "(medians): " + ", ".join(f"{s} {steps[s]:.2f} s" for s in named) + "."
        )
    return [*out, "", *notes, ""]


LINK_STEPS = {
    "delete_linked": "delete a note other notes link to",
    "add_resolving": "write it back (their links resolve again)",
    "rename_linked": "rename another linked note",
    "rename_back": "rename it back",
}


def link_edit_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Adds, deletes and renames that move other notes' edges, before and after they publish deltas."""
    data = results.get("link_edit")
    if not data or "after" not in data:
        return []
    labels = [k for k in ("before", "after") if k in data]
    after = data["after"]
    out = [
        "## Edits that move other notes' links (issue 29)",
        "",
        "Dendron's docs (heavily linked), one cold build, then two cycles of the four steps below, each",
        "`vaultsearch index` as a new process: medians of the two cycles' wall time and bytes of new or changed",
        "files under the index directory. *before*: the code that staged such an edit on the whole base; *after*:",
        "the notes whose resolved edges move are re-published in the delta at their kept ids.",
        f"Deleted: `{after['deleted']['path']}` ({after['deleted']['backlinks']} notes link to it); renamed:",
        f"`{after['renamed']['path']}` ({after['renamed']['backlinks']}).",
        "",
        "    python -m bench.bench_link_edit --code <checkout before> --label before && python -m bench.bench_link_edit",
        "",
        "| step | " + " | ".join(f"{label} wall | {label} written" for label in labels) + " |",
        "|---|" + "---:|---:|" * len(labels),
    ]
    for step, text in LINK_STEPS.items():
        cells = []
        for label in labels:
            s = data[label]["steps"][step]
            cells.append(f"{s['wall_seconds_median']:.2f} s | {_bytes(s['bytes_written_median'])}")
        out.append(f"| {text} | " + " | ".join(cells) + " |")
    loads = ", ".join(f"{label} {data[label].get('machine', {}).get('load_avg_1m', '?')}" for label in labels)
    out += ["", f"Measured {after.get('machine', {}).get('date', '?')}; 1-minute load at the end: {loads}.", ""]
    return out


COLD_AB_PREFIXES = ("cold_ab", "coldprobe_ab")


def cold_ab_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Cold builds of code trees, alternating (every ``bench_cold_ab`` JSON: ``cold_ab*``, ``coldprobe_ab*``):
    medians and minima of wall, CPU and peak RSS per corpus and tree."""
    keys = sorted(k for k in results if k.startswith(COLD_AB_PREFIXES) and results[k].get("corpora"))
    if not keys:
        return []
    out = [
        "## Cold build before the storage work and now (issue 29)",
        "",
        "Each build is `vaultsearch index VAULT` into an empty index directory as a new process under",
        "`/usr/bin/time -v`, the trees alternating run by run (the machine is shared: no tree's runs are grouped).",
        "CPU is user + system seconds of the builder and the workers it waited for; peak RSS is the largest single",
        "process; median (least) of each file's runs. *before* is b372bc0 (before the storage work). The target:",
        "no worse than before by 10%.",
        "",
        "    python -m bench.bench_cold_ab --tree before=<checkout of b372bc0> --tree now=. --vault NAME=PATH ...",
        "",
        "| results | corpus | tree | runs | wall | CPU | peak RSS | load |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for key in keys:
        for corpus, per_tree in results[key]["corpora"].items():
            for tree, s in per_tree.items():
                loads = [x for r in s.get("runs", []) for x in r.get("load_1m", [])]
                load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
                out.append(
                    f"| {key} | {corpus} | {tree} | {len(s.get('runs', []))} "
                    f"| {s['wall_s_median']:.1f} s ({s['wall_s_min']:.1f}) "
                    f"| {s['cpu_s_median']:.1f} s ({s['cpu_s_min']:.1f}) "
                    f"| {s['peak_rss_mb_median']:.0f} MB ({s['peak_rss_mb_min']:.0f}) | {load} |"
                )
    return [*out, ""]


def _p(split: dict[str, Any] | None) -> str:
    return "-" if not split else f"{split['p50_s']:.2f} / {split['p95_s']:.2f} s"


WATCH_VIEW_NOTE = (
    "The same bench after the view (`core.ranking.segment_view`: a reader's switch builds a view of the segments and",
    "loads only the new ones, where it combined or derived whole arrays), the code before it measured in the same",
    "run on the same machine (an AVX-512 one, quiet: load about 0.9), each run on a fresh copy of the vault.",
)


WATCH_KNOWN_NOTE = (
    "The same bench with the watcher's builds on what its last build knew (`core.build.known`: the last scan",
    "brought up to date at the event paths, the published generation's rows kept, one walk when quiet), beside",
    "main before it (`0124cb4`) in the same run on the same machine, each on its own copy of one built vault.",
)


WATCH_READER_NOTE = (
    "The same bench after a reader's switch to a new generation was made to cost its new segment (stop 39:",
    "a view's suffix list and typo alphabet spliced from its base's, its name terms read per row), beside main",
    "before it (`c8e499f`) in the same run, alternating, on one built 100k vault (about 9 segments). This",
    "reader is unrestricted and searches known words, so it gains little here; the serving bench's 100k row",
    "(a server with classifications, polling an unknown word) is where the change shows.",
)


def watch_split_section(
    results: dict[str, dict[str, Any]], key: str = "watch_s35", note: tuple[str, ...] = (), title: str | None = None
) -> list[str]:
    """Edit to searchable through a running watcher, split into its parts (``bench/results/<key>.json``: one
    bench_watch JSON per run, keyed by what the run was)."""
    data = results.get(key)
    if not data:
        return []
    suffix = title if title is not None else (" after the view" if note else "")
    out = [
        f"## One-note edit through a running watcher, split into its parts (issue 29){suffix}",
        "",
        "The baseline's bench (`vaultsearch watch` as its own process, a long-lived reader polling `search_vault`)",
        "on this stop's code, each edit split: *event* (the write to the watcher's build start: file events and",
        "debounce), *build* (the watcher's build), *after* (the build's end to the reader's hit: noticing the",
        "generation, switching to it), *search* (the search that found the note). p50 / p95 of each; the 100k",
        "vault is a built copy (`--reuse`). Targets: p95 <= 0.5 s at 3k notes, <= 1 s at 100k.",
        *note,
        "",
        "    python -m bench.bench_watch --corpus powershell --edits 20",
        "    python -m bench.bench_watch --corpus none --reuse VAULT --edits 5",
        "",
        "| corpus | notes | edits | edit to searchable | event | build | after | search | written (index dir) | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, run in data.items():  # one corpus per run: named by its key (a reused copy's folder name says little)
        for c in run["corpora"].values():
            load = c.get("load_avg_1m") or {}
            out.append(
                f"| {name} | {c['notes']:,} | {c['edit_to_searchable']['n']} | {_p(c['edit_to_searchable'])} "
                f"| {_p(c.get('event_to_build'))} | {_p(c.get('build_seconds'))} | {_p(c.get('after_build'))} "
                f"| {_p(c.get('last_search'))} | {_bytes((c.get('walk_bytes') or {}).get('median'))} "
                f"| {load.get('before', '?')}-{load.get('after', '?')} |"
            )
    dates = sorted({run.get("machine", {}).get("date", "?")[:16] for run in data.values()})
    memory = [
        f"{name} {m['rss'] / 1024:.0f} MiB (peak {m['peak_rss'] / 1024:.0f} MiB)"
        for name, run in data.items()
        for c in run["corpora"].values()
        if (m := c.get("watcher_memory_kib")) and "rss" in m and "peak_rss" in m
    ]
    held = [f"The watcher process's resident memory after the last edit: {'; '.join(memory)}.", ""] if memory else []
    return [*out, "", *held, f"Measured {', '.join(dates)} on 2 cores shared with other work.", ""]


def _biggest(tables: dict[str, dict[str, int]], n: int = 4) -> str:
    top = sorted(tables.items(), key=lambda kv: -kv[1]["bytes"])[:n]
    return ", ".join(f"{name} {t['bytes'] / 1e6:.2f}" for name, t in top)


def size_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Index bytes on disk with two generations retained, over the Markdown bytes, per corpus: schema 22 (stop
    34), schema 24 (the tree before text blocks), schema 25 (the tree before links stored once) and schema 27
    (stop 40's, the tree before this stop) beside this stop's format (``bench/results/size*.json``,
    ``python -m bench.bench_size``)."""
    now = {
        name: c
        for key in ("size", "size_mdn", "size_100k")
        for name, c in (results.get(key) or {}).get("corpora", {}).items()
    }
    if not now:
        return []
    before = (results.get("size_schema22") or {}).get("corpora", {})
    before24, before25, before27 = (
        {
            **(results.get(f"size_schema{v}") or {}).get("corpora", {}),
            **(results.get(f"size_mdn_schema{v}") or {}).get("corpora", {}),
            **(results.get(f"size_100k_schema{v}") or {}).get("corpora", {}),
        }
        for v in (24, 25, 27)
    )
    out = [
        "## Index size with two generations retained (issue 29)",
        "",
        "Each corpus copied, built cold, one note edited and built again (the default keep=2 retains both",
        "generations: the base segment, the edit's small segment and tombstone); every file under the index",
        "directory counted, over the Markdown bytes. *Schema 22*: stop 34's format (postings stored once);",
        "*schema 24*: posting pieces as zlib byte planes, FTS5 built with a 16 MB hash (the merged result, no",
        "fragment rewrite), chunk rows without a text digest, file hashes as 32 raw bytes; *schema 25*: the cells",
        "of several notes stored back to back in blocks of 32 KB (`core.index.tables.text_blocks`), measured from",
        "a worktree of stop 40's tree before; *schema 27*: stop 40's format, a link stored once (schema 26: no display text, a",
        "resolved edge without its target and destination path, lookup keys as 63-bit hashes, a partial index of",
        "the `supersedes` edges), a whole segment of less than 16 MiB of Markdown in 2 KB pages, and the note",
        "texts as zstd frames with a trained dictionary; *now* (schema 28): a note's path indexed once (no",
        "UNIQUE index beside `notes_stat`), a text frontmatter id stored once, the term-major arrays as zstd",
        "level 7 frames (were zlib 6). Target: <= 2x on every corpus. Biggest tables of the base segment now,",
        "in MB (SQLite `dbstat`).",
        "",
        "    python -m bench.bench_size --corpus scifact,dendron,powershell --sizes 10000 && "
        "python -m bench.bench_size --corpus mdn --out bench/results/size_mdn.json && "
        "python -m bench.bench_size --corpus none --sizes 100000 --out bench/results/size_100k.json",
        "",
        "| corpus | notes | Markdown | schema 22 | schema 24 | schema 25 | schema 27 | now | biggest tables now |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def ratio(found: dict[str, Any] | None) -> str:
        return "-" if not found else f"{found['index_over_markdown']:.2f}x"

    for name, c in now.items():
        out.append(
            f"| {name} | {c['notes']:,} | {_bytes(c['markdown_bytes'])} | {ratio(before.get(name))} "
            f"| {ratio(before24.get(name))} | {ratio(before25.get(name))} | {ratio(before27.get(name))} "
            f"| {c['index_over_markdown']:.2f}x "
            f"| {_biggest(c.get('tables') or {})} |"
        )
    dates = sorted(
        {
            r.get("machine", {}).get("date", "?")[:16]
            for r in (results.get("size"), results.get("size_mdn"), results.get("size_100k"))
            if r
        }
    )
    return [
        *out,
        "",
        f"Measured {', '.join(dates)} on 2 shared cores.",
        "",
        *_read_time(results.get("fts_warm_s41"), _NONZERO_READ, own_builds=False),
        *_read_time(results.get("fts_warm_s40"), _ZSTD_READ),
        *_read_time(results.get("fts_warm_blocks"), _BLOCKS_READ),
    ]


_NONZERO_READ = (
    "Stop 41's query path (numpy's nonzero of a bool array, never of a float or uint8 one; the name match of",
    "the rows whose name holds the query only) and its format (schema 28: the term-major arrays as zstd",
    "frames): warm fts, the tree before the query-path change (schema 28 already) and now, both on the same",
    "cold build of each vault (one segment), alternated round by round (medians of 3 rounds).",
)
_ZSTD_READ = (
    "What this stop's format costs a search (each hit's cell is a zstd frame now, a segment of less than 16 MiB",
    "of Markdown has 2 KB pages): warm fts, the tree before this stop (schema 25) and now, each on its own",
    "cold build of the same notes, alternated round by round (medians of 3 rounds).",
)
_BLOCKS_READ = (
    "What the blocks cost a search (a note's cell is read from its block: one more query, a 32 KB blob):",
    "warm fts, the tree before (schema 24) and now, each on its own build of the same notes, alternated",
    "round by round (medians of the rounds: 4 on the 100k vault, 3 on the others). The 100k vault: the one",
    "the watcher bench edited (9 segments) for `before`; a copy of its notes built cold and after 8",
    "one-note edits (9 segments) for `now`.",
)


def _read_time(data: dict[str, Any] | None, intro: tuple[str, ...], own_builds: bool = True) -> list[str]:
    """A warm fts comparison (``bench_fts_warm``): before and now, each tree on its own build (``own_builds``),
    else both on the same builds."""
    if not data or not data.get("vaults"):
        return []
    out = [
        *intro,
        "",
        "    python -m bench.bench_fts_warm --vault NAME=PATH ... --code before=TREE "
        + ("--vault-of before:NAME=ITS_PATH ... " if own_builds else "")
        + "--rounds 3",
        "",
        "| vault | before p50 / p95 | now p50 / p95 |",
        "|---|---:|---:|",
    ]
    for name, runs in data["vaults"].items():
        was, now = runs.get("before") or {}, runs.get("now") or {}
        out.append(
            f"| {name} | {was.get('p50_ms', 0):.2f} / {was.get('p95_ms', 0):.2f} ms "
            f"| {now.get('p50_ms', 0):.2f} / {now.get('p95_ms', 0):.2f} ms |"
        )
    dates = [str(data.get(k, {}).get("date", "?"))[:16] for k in ("machine", "synth100k_machine") if k in data]
    return [
        *out,
        "",
        f"Measured {', '.join(dates)}, 1-minute load {data.get('load_before', 0):.1f}, on 2 shared cores.",
        "",
    ]


def new_process_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """A new process's first search on one segment and on a segmented generation of the same notes."""
    data, built = results.get("new_process"), results.get("new_process_100k_view")
    if not (data and data.get("corpora")) and not (built and built.get("built")):
        return [*_numpy_ma_lines(results.get("new_process_numpy_ma")), *_held_lines(results.get("new_process_held"))]
    out = [
        "## A new process's first search on a segmented generation (issue 29)",
        "",
        "Each corpus copied and indexed cold (one segment), then one-note edits each indexed incrementally (a",
        "delta segment and a tombstone each). Before and after the edits, new processes each time one fts",
        "`search_vault` in process (start-up and imports excluded), after one that hashes the new parts.",
        "Before the view (`core.ranking.segment_view`), a new process combined every segment's arrays before",
        "its first search; the view reads the postings its query asks for from the segments, as one segment",
        "does. Target: a new process's search no slower than today's (one segment).",
        "",
    ]
    if data and data.get("corpora"):
        out += [
            "    python -m bench.bench_new_process --corpus powershell,scifact --edits 5",
            "",
            "| corpus | one segment | segmented | segments | load |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, c in data["corpora"].items():
            one, seg = c["one_segment"], c["segmented"]
            out.append(
                f"| {name} | {one['median']:.2f} s | {seg['median']:.2f} s | {seg['segments']} "
                f"| {c['load_avg_1m']:.1f} |"
            )
        out += ["", f"Measured {data.get('machine', {}).get('date', '?')[:16]} on 2 shared cores.", ""]
    if built and built.get("built"):
        runs = built["built"]
        trees = [k for k in runs if isinstance(runs[k], dict)]
        out += [
            "The 100k synthetic vault, built once (a cold build: one segment) and a copy of it after 7 one-note",
            "edits (8 segments), measured by the code before the view (`before`) and with it (`now`), the trees",
            "and vaults alternated run by run (medians of 3):",
            "",
            "    python -m bench.bench_new_process --built ONE SEGMENTED --code before=TREE --runs 3",
            "",
            "| code | one segment | segmented (8 segments) |",
            "|---|---:|---:|",
            *(
                f"| {k} | {runs[k]['one_segment']['median']:.2f} s | {runs[k]['segmented']['median']:.2f} s |"
                for k in trees
            ),
            "",
            f"Measured {built.get('machine', {}).get('date', '?')[:16]}, 1-minute load "
            f"{runs.get('load_avg_1m', 0):.1f}, on 2 shared cores.",
            "",
        ]
    return [*out, *_numpy_ma_lines(results.get("new_process_numpy_ma")), *_held_lines(results.get("new_process_held"))]


def _numpy_ma_lines(data: dict[str, Any] | None) -> list[str]:
    """A new process's first search before and after its path stopped importing ``numpy.ma``."""
    intro = (
        "The PowerShell docs built once (one segment) and a copy after 5 one-note edits (6 segments), by the",
        "code before (`before`) and after (`now`) a search stopped importing `numpy.ma` (`np.unique`'s check",
        "for a masked array imported it: `core.ranking.postings.distinct` instead), alternated run by run",
        "(medians of 5):",
    )
    return _built_lines(data, intro, 5)


def _held_lines(data: dict[str, Any] | None) -> list[str]:
    """A new process's first search before and after a small segment's arrays are read in one query."""
    intro = (
        "The same, schema 27, before (`before`) and after (`now`) a small segment's stored arrays, read whole,",
        "are read in one query instead of one per array and piece (`core.ranking.stored.HELD_GROUP_BYTES`:",
        "228 queries for the 6 segments' arrays, 93 for one segment's), alternated run by run (medians of 9):",
    )
    return _built_lines(data, intro, 9)


def _built_lines(data: dict[str, Any] | None, intro: tuple[str, ...], runs_n: int) -> list[str]:
    """``bench_new_process --built``'s table: each code tree's first search on one segment and on six."""
    runs = (data or {}).get("built")
    if not runs:
        return []
    trees = [k for k in runs if isinstance(runs[k], dict)]
    return [
        *intro,
        "",
        f"    python -m bench.bench_new_process --built ONE SEGMENTED --code before=TREE --runs {runs_n}",
        "",
        "| code | one segment | segmented (6 segments) |",
        "|---|---:|---:|",
        *(
            f"| {k} | {runs[k]['one_segment']['median'] * 1e3:.1f} ms | {runs[k]['segmented']['median'] * 1e3:.1f} ms |"
            for k in trees
        ),
        "",
        f"Measured {str((data or {}).get('machine', {}).get('date', '?'))[:16]}, 1-minute load "
        f"{runs.get('load_avg_1m', 0):.1f}, on 2 shared cores.",
        "",
    ]


def fts_warm_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Warm fts latency per code tree (``bench/results/fts_warm.json``, ``python -m bench.bench_fts_warm``)."""
    data = results.get("fts_warm")
    if not data or not data.get("vaults"):
        return []
    out = [
        "## Warm fts with exact pruning (issue 29)",
        "",
        'A long-lived process\'s `search_vault(mode="fts", limit=10)` with passages, after 20 warm-up queries,',
        'each query once, the freshness check off (`core.ranking.pruning`: docs/architecture.md, "Exact pruning',
        'of `fts`"). The code before pruning (`before`) and now, each in its own process, alternated round by',
        "round on the same built vaults (medians of the rounds' p50 and p95). Target: p50 <= 10 ms at 100k",
        "notes with the segment count the merge policy allows (up to 11 segments; `synth100k_9seg` is the 100k",
        "vault after the watcher bench's edits, 9 segments; `synth100k_2seg` the same after `--optimize`).",
        "",
        "    python -m bench.bench_fts_warm --vault NAME=PATH ... --code before=TREE --rounds 2",
        "",
        "| vault | before p50 / p95 | now p50 / p95 | queries | pruned / refused attempts (now) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, trees in data["vaults"].items():
        before, now = trees.get("before"), trees["now"]
        first = now["runs"][0]
        was = f"{before['p50_ms']:.1f} / {before['p95_ms']:.1f} ms" if before else "-"
        out.append(
            f"| {name} | {was} | {now['p50_ms']:.1f} / {now['p95_ms']:.1f} ms | {first['queries']} "
            f"| {first['pruned']} / {first['refused']} |"
        )
    out += [
        "",
        f"Measured {data.get('machine', {}).get('date', '?')[:16]}, 1-minute load {data.get('load_before', 0):.1f}"
        f" -> {data.get('load_after', 0):.1f}, on 2 shared cores. The queries: `bench.synth.make_queries` (seed 1)",
        "on the synthetic vault, the dev sets on PowerShell (known-item) and SciFact. The scaling table's 6.0 ms",
        "at 100k (above) is the 2026-11-30 run, before per-note languages added exact forms and expansions",
        "(a query's postings doubled) and before the passage bonus.",
        "",
    ]
    return out
