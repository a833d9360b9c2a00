"""Edit benchmark (issue 29's baseline): what one edited note costs today's write path, beside tantivy.

Per corpus (a fresh copy in a temporary folder, the index in a folder beside it) it measures:

1. ``vaultsearch index VAULT`` as a whole new process after a one-note edit (wall time around
   the subprocess, interpreter start-up included), median of ``EDITS`` edits: one line appended
   to a different mid-sized note each time;
2. bytes written to the index directory per edit: a walk of ``(path, size, mtime_ns, inode)``
   before and after; every file that is new or whose size, mtime or inode changed counts with
   its full size (``walk_bytes``). Beside it the child's own ``/proc/self/io`` counters, read at
   its exit (they include its reaped worker processes): ``write_bytes`` (bytes it caused to be
   sent to storage) and ``wchar`` (bytes passed to write-like system calls, page cache included);
3. index bytes on disk with two generations retained (the default ``keep=2``) against the
   Markdown bytes of the vault;
4. tantivy on the same notes (title + body fields): a cold index, then per edit
   delete + add of the edited document + commit + reader reload (timed), its merges waited
   for (not timed), the bytes written to its directory by the same walk, and its index bytes
   against the Markdown bytes;
5. bm25s on the same notes: it has no update, so its cost for one edit is its whole write path
   (read every note, tokenize, index, save; ``bench_coldstart.save_bm25s``), timed once per edit
   into the same folder, with the bytes written by the same walk and its index bytes.

The index-size table (``index_sizes`` in the JSON) puts the three engines' bytes on disk beside
the Markdown bytes for every corpus, vaultsearch with two generations retained (and its active
generation alone). Corpora: the PowerShell docs, SciFact, Dendron's docs, the multilingual MDN vault
(all seven language folders as ONE vault copy, 6,347 notes: the corpus as one user would keep it;
the eval sets index each language on its own) and, with ``--sizes``, synthetic vaults.

Results go to ``bench/results/edit.json``; ``bench/report_edit.py`` renders them.

    python -m bench.bench_edit [--corpus powershell|scifact|dendron|mdn|all|none] [--sizes 10000] [--out PATH]
    python -m bench.bench_edit --reuse VAULT [--reuse-index DIR] [--edits 5] --out PATH   (bench/edit_reuse.py)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, REPO_ROOT, RESULTS_DIR, copy_vault, dir_size_bytes, machine_info, write_json

CORPORA: dict[str, Path] = {
    "powershell": DATA_DIR / "powershell-docs" / "reference",
    "scifact": DATA_DIR / "scifact" / "vault",
    "dendron": DATA_DIR / "dendron" / "vault",
    "mdn": DATA_DIR / "multilingual" / "vault",
}
EDITS = 3
TANTIVY_HEAP = 64 * 2**20
# ``vaultsearch index`` as one process, writing its /proc/self/io at exit to the file named by argv[1].
_CHILD = (
    "import atexit, sys\n"
    "def _io(out=sys.argv[1]):\n"
    "    try:\n"
    "        text = open('/proc/self/io').read()\n"
    "    except OSError as exc:\n"
    "        text = 'unreadable: ' + str(exc)\n"
    "    open(out, 'w').write(text)\n"
    "atexit.register(_io)\n"
    "from core.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)

Walk = dict[str, tuple[int, int, int]]


# ---------------------------------------------------------------- pure helpers (tested)


def walk_files(root: Path) -> Walk:
    """``{relative path: (size, mtime_ns, inode)}`` of every regular file under ``root`` (no symlinks)."""
    out: Walk = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if os.path.islink(full):
                continue
            out[os.path.relpath(full, root)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def bytes_written(before: Walk, after: Walk) -> dict[str, Any]:
    """What changed between two walks: a new or rewritten file (size, mtime or inode differs) counts whole.

    An upper bound of what was written to files still present (a file rewritten in place counts
    its full size even if one page changed); files created and removed in between are not seen.
    """
    created = sorted(p for p in after if p not in before)
    changed = sorted(p for p in after if p in before and after[p] != before[p])
    removed = sorted(p for p in before if p not in after)
    return {
        "bytes": sum(after[p][0] for p in created + changed),
        "created": len(created),
        "changed": len(changed),
        "removed": len(removed),
    }


def index_size_row(markdown_bytes: int, engines: Mapping[str, int | None]) -> dict[str, Any]:
    """One row of the index-size table: each engine's bytes on disk and their ratio to the Markdown bytes
    (``None`` for an engine that did not run)."""
    if markdown_bytes <= 0:
        raise ValueError(f"markdown_bytes must be positive, got {markdown_bytes}")
    row: dict[str, Any] = {"markdown_bytes": markdown_bytes}
    for name, size in engines.items():
        row[name] = None if size is None else {"bytes": size, "over_markdown": round(size / markdown_bytes, 2)}
    return row


def generation_bytes(walk: Walk) -> dict[str, int]:
    """``{file: bytes}`` of the generation files (``generations/*.db``) in a walk of an index directory."""
    return {p: walk[p][0] for p in sorted(walk) if Path(p).parent.name == "generations" and p.endswith(".db")}


def active_generation_bytes(generations: Mapping[str, int], generation_id: str | None) -> int | None:
    """The bytes of the generation file named ``<generation_id>.db`` (``None`` if there is no such file)."""
    matches = [size for path, size in generations.items() if generation_id and Path(path).stem == generation_id]
    return matches[0] if len(matches) == 1 else None


def manifest_generation_bytes(index_dir: Path, generation_id: str | None) -> int | None:
    """The bytes of one generation in the segment layout: its manifest ``manifests/<M>.json`` (the
    generation id ends with the first hex digits of ``M``) plus the size the manifest records for every
    part it lists (segments, tombstones, dense parts); ``None`` when no single manifest matches."""
    suffix = (generation_id or "").rpartition("-")[2]
    found = sorted((index_dir / "manifests").glob(f"{suffix}*.json")) if suffix else []
    if len(found) != 1:
        return None
    data = json.loads(found[0].read_text(encoding="utf-8"))
    parts = [part for key in ("segments", "tombstones", "dense") for part in data.get(key) or ()]
    return found[0].stat().st_size + sum(int(part["size"]) for part in parts if isinstance(part, dict))


def one_generation_bytes(index_dir: Path, generation_id: str | None) -> int | None:
    """The active generation's own bytes in either layout: its ``generations/<id>.db`` file, or its
    manifest and the parts it lists (parts shared with another generation counted here too)."""
    whole = active_generation_bytes(generation_bytes(walk_files(index_dir)), generation_id)
    return whole if whole is not None else manifest_generation_bytes(index_dir, generation_id)


def parse_proc_io(text: str) -> dict[str, int] | None:
    """``/proc/PID/io`` as ``{field: int}``; ``None`` for an ``unreadable: ...`` marker or empty text."""
    if not text or text.startswith("unreadable"):
        return None
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip():
            fields[key.strip()] = int(value)
    return fields


def mid_sized(paths_and_sizes: Sequence[tuple[str, int]], n: int) -> list[str]:
    """``n`` distinct notes around the median size (sorted by size, then path), nearest to it first."""
    if len(paths_and_sizes) < n:
        raise ValueError(f"need at least {n} notes, have {len(paths_and_sizes)}")
    ordered = sorted(paths_and_sizes, key=lambda item: (item[1], item[0]))
    mid = len(ordered) // 2
    picks, step = [ordered[mid][0]], 1
    while len(picks) < n:
        for idx in (mid + step, mid - step):
            if 0 <= idx < len(ordered) and len(picks) < n:
                picks.append(ordered[idx][0])
        step += 1
    return picks


def note_title(rel: str, text: str) -> str:
    """A note's title for the tantivy side: frontmatter ``title:``, else the first ``# `` heading, else the stem."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for line in lines[1:]:
            if line.strip() == "---":
                break
            if line.startswith("title:"):
                return line[len("title:") :].strip().strip("'\"")
    for line in lines:
        if line.startswith("# "):
            return line[2:].strip()
    return Path(rel).stem


# ---------------------------------------------------------------- vaultsearch side


def _md_files(vault: Path) -> list[tuple[str, int]]:
    return sorted((p.relative_to(vault).as_posix(), p.stat().st_size) for p in vault.rglob("*.md") if p.is_file())


def append_line(vault: Path, rel: str, number: int) -> None:
    """Append one line to a note (the edit every measurement is about)."""
    with (vault / rel).open("a", encoding="utf-8") as fh:
        fh.write(f"\nThis line was appended by the edit benchmark, edit number {number}.\n")


def run_index(vault: Path, index_dir: Path, io_file: Path) -> dict[str, Any]:
    """``vaultsearch index VAULT --index-dir DIR --json`` in a new process: wall seconds, its report, its io."""
    cmd = [sys.executable, "-c", _CHILD, str(io_file), "index", str(vault), "--index-dir", str(index_dir), "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child's CPU (its reaped workers too): load-proof
    cpu = after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime
    if proc.returncode != 0:
        raise RuntimeError(f"vaultsearch index exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    report = json.loads(proc.stdout)
    io = parse_proc_io(io_file.read_text(encoding="utf-8")) if io_file.is_file() else None
    return {"wall_seconds": wall, "cpu_seconds": cpu, "report": report, "proc_io": io}


def _summary(report: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("generation_id", "added", "changed", "removed", "unchanged", "up_to_date")
    return {k: report[k] for k in keys if k in report}


def measure_vaultsearch(vault: Path, index_dir: Path, edits: Sequence[str], tmp: Path) -> dict[str, Any]:
    """Cold build, then per edit: append a line, ``vaultsearch index`` as a new process, bytes written."""
    cold = run_index(vault, index_dir, tmp / "io-cold.txt")
    runs = []
    for i, rel in enumerate(edits):
        before = walk_files(index_dir)
        append_line(vault, rel, i)
        run = run_index(vault, index_dir, tmp / f"io-{i}.txt")
        diff = bytes_written(before, walk_files(index_dir))
        io = run["proc_io"] or {}
        runs.append(
            {
                "note": rel,
                "wall_seconds": round(run["wall_seconds"], 3),
                "cpu_seconds": round(run["cpu_seconds"], 3),
                "walk": diff,
                "proc_write_bytes": io.get("write_bytes"),
                "proc_wchar": io.get("wchar"),
                "report": _summary(run["report"]),
            }
        )
    return {
        "cold_wall_seconds": round(cold["wall_seconds"], 3),
        "cold_report": _summary(cold["report"]),
        "edits": runs,
        "median_wall_seconds": round(statistics.median(r["wall_seconds"] for r in runs), 3),
        "median_cpu_seconds": round(statistics.median(r["cpu_seconds"] for r in runs), 3),
        "median_walk_bytes": statistics.median(r["walk"]["bytes"] for r in runs),
        "median_proc_write_bytes": _median_or_none([r["proc_write_bytes"] for r in runs]),
        "median_proc_wchar": _median_or_none([r["proc_wchar"] for r in runs]),
        "index_bytes": dir_size_bytes(index_dir),
        "generation_files": sorted(p for p in walk_files(index_dir) if p.endswith(".db")),
        "generation_bytes": generation_bytes(walk_files(index_dir)),
        "active_generation_bytes": one_generation_bytes(index_dir, runs[-1]["report"].get("generation_id")),
    }


def _median_or_none(values: Sequence[int | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if len(present) == len(values) and present else None


# ---------------------------------------------------------------- tantivy side


def _tantivy_doc(tantivy: Any, vault: Path, rel: str) -> Any:
    text = (vault / rel).read_text(encoding="utf-8", errors="replace")
    return tantivy.Document(path=rel, title=note_title(rel, text), body=text)


def _tantivy_edit(tantivy: Any, index: Any, vault: Path, rel: str, tdir: Path) -> dict[str, Any]:
    """Delete + add + commit + reload of one note (timed); merges waited for after the clock stops."""
    writer = index.writer(TANTIVY_HEAP)
    before = walk_files(tdir)
    start = time.perf_counter()
    writer.delete_documents_by_term("path", rel)
    writer.add_document(_tantivy_doc(tantivy, vault, rel))
    writer.commit()
    index.reload()
    hits = index.searcher().search(tantivy.Query.term_query(index.schema, "path", rel), 2).count
    wall = time.perf_counter() - start
    writer.wait_merging_threads()
    if hits != 1:
        raise RuntimeError(f"tantivy: {hits} documents for {rel} after the edit, expected 1")
    return {"note": rel, "wall_seconds": round(wall, 4), "walk": bytes_written(before, walk_files(tdir))}


def measure_tantivy(vault: Path, tdir: Path, edits: Sequence[str]) -> dict[str, Any]:
    """A tantivy index of the same notes (path raw, title + body text), then the same edits, one by one."""
    import tantivy  # the bench extra's; never at module top (the tests need only the test extra)

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("path", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True)
    builder.add_text_field("body")
    schema = builder.build()
    tdir.mkdir()
    index = tantivy.Index(schema, path=str(tdir))
    writer = index.writer(TANTIVY_HEAP)
    start = time.perf_counter()
    for rel, _size in _md_files(vault):
        writer.add_document(_tantivy_doc(tantivy, vault, rel))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    cold = time.perf_counter() - start
    runs = [_tantivy_edit(tantivy, index, vault, rel, tdir) for rel in edits]
    return _engine_result(tantivy, cold, runs, tdir, digits=4)


def _engine_result(module: Any, cold: float, runs: list[dict[str, Any]], folder: Path, digits: int) -> dict[str, Any]:
    """A baseline engine's figures: its version, cold build, per-edit runs, their medians, its bytes on disk."""
    return {
        "version": getattr(module, "__version__", "unknown"),
        "cold_wall_seconds": round(cold, 3),
        "edits": runs,
        "median_wall_seconds": round(statistics.median(r["wall_seconds"] for r in runs), digits),
        "median_walk_bytes": statistics.median(r["walk"]["bytes"] for r in runs),
        "index_bytes": dir_size_bytes(folder),
    }


# ---------------------------------------------------------------- bm25s side


def measure_bm25s(vault: Path, bdir: Path, edits: Sequence[str]) -> dict[str, Any]:
    """bm25s has no update: per edit, its whole write path again (read, tokenize, index, save) into
    the same folder, timed, with the bytes that rewrote; a cold save first (not counted)."""
    from bench.bench_coldstart import save_bm25s  # imports bm25s only when called

    bdir.mkdir()
    start = time.perf_counter()
    save_bm25s(vault, bdir)
    cold = time.perf_counter() - start
    runs = []
    for rel in edits:
        before = walk_files(bdir)
        start = time.perf_counter()
        save_bm25s(vault, bdir)
        wall = time.perf_counter() - start
        runs.append({"note": rel, "wall_seconds": round(wall, 3), "walk": bytes_written(before, walk_files(bdir))})
    import bm25s

    return _engine_result(bm25s, cold, runs, bdir, digits=3)


# ---------------------------------------------------------------- orchestration


def bench_corpus(name: str, source: Path) -> dict[str, Any]:
    """The engines on one copy of the corpus: vaultsearch first, then tantivy and bm25s on the edited notes."""
    with tempfile.TemporaryDirectory(prefix=f"bench-edit-{name}-") as tmp_name:
        tmp = Path(tmp_name)
        vault = copy_vault(source, tmp / "vault")
        files = _md_files(vault)
        edits = mid_sized(files, EDITS)
        md_bytes = sum(size for _rel, size in files)
        vs = measure_vaultsearch(vault, tmp / "index", edits, tmp)
        tv = measure_tantivy(vault, tmp / "tantivy", edits)
        bm = measure_bm25s(vault, tmp / "bm25s", edits)
        vs["index_over_markdown"] = round(vs["index_bytes"] / md_bytes, 2)
        tv["index_over_markdown"] = round(tv["index_bytes"] / md_bytes, 2)
        bm["index_over_markdown"] = round(bm["index_bytes"] / md_bytes, 2)
        return {
            "notes": len(files),
            "markdown_bytes": md_bytes,
            "edited_note_bytes": {rel: size for rel, size in files if rel in edits},
            "vaultsearch": vs,
            "tantivy": tv,
            "bm25s": bm,
            "index_sizes": index_size_row(
                md_bytes,
                {
                    "vaultsearch": vs["index_bytes"],
                    "vaultsearch_one_generation": vs["active_generation_bytes"],
                    "tantivy": tv["index_bytes"],
                    "bm25s": bm["index_bytes"],
                },
            ),
        }


def synthetic_vault(size: int, root: Path) -> Path:
    """A synthetic vault of ``size`` notes, its files aged a day (bench_build.backdate): a real vault's
    notes are old, and fresh mtimes would make the builder re-hash notes inside its racy window."""
    from bench.bench_build import backdate
    from bench.synth import make_vault

    out = root / f"synth-{size}"
    make_vault(out, size)
    backdate(out, 86400.0)
    return out


def _with_load(fn: Any, *args: Any) -> dict[str, Any]:
    """``fn(*args)`` with the 1-minute load average before and after it (the machine is shared)."""
    before = os.getloadavg()[0]
    out: dict[str, Any] = fn(*args)
    out["load_avg_1m"] = {"before": round(before, 2), "after": round(os.getloadavg()[0], 2)}
    return out


def run_header(load_before: Sequence[float]) -> dict[str, Any]:
    """The machine and the load averages before (given) and now: the machine is shared, so say how busy."""
    return {
        "machine": machine_info(),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }


def parse_corpus_args(
    doc: str | None, out: Path, argv: Sequence[str] | None, *, edit_options: bool = False
) -> tuple[argparse.Namespace, list[str]]:
    """``--corpus``, ``--sizes`` and ``--out`` (default ``out``), with ``edit_options`` ``--reuse``,
    ``--reuse-index`` and ``--edits``; and the corpus names chosen."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="all", help=f"comma list of {', '.join(CORPORA)}, or all, or none")
    parser.add_argument("--sizes", default="", help="comma-separated synthetic vault sizes (e.g. 10000); default none")
    parser.add_argument("--out", type=Path, default=out)
    if edit_options:
        parser.add_argument(
            "--reuse",
            type=Path,
            default=None,
            help="edit this built vault (a copy: it is edited) instead of cold builds",
        )
        parser.add_argument("--reuse-index", type=Path, default=None, help="its index dir (default VAULT/.vaultsearch)")
        parser.add_argument(
            "--edits", type=int, default=EDITS, help="edits with --reuse (the first one is reported apart)"
        )
    args = parser.parse_args(argv)
    names = list(CORPORA) if args.corpus == "all" else [] if args.corpus == "none" else args.corpus.split(",")
    unknown = [n for n in names if n not in CORPORA]
    if unknown:
        parser.error(f"unknown corpus {unknown}: choose from {', '.join(CORPORA)}")
    return args, names


def main(argv: Sequence[str] | None = None) -> None:
    args, names = parse_corpus_args(__doc__, RESULTS_DIR / "edit.json", argv, edit_options=True)
    if args.reuse is not None:
        from bench.edit_reuse import reuse_main

        print(write_json(args.out, reuse_main(args.reuse, args.reuse_index, args.edits)))
        return
    corpora: dict[str, Any] = {}
    load_before = os.getloadavg()
    for name in names:
        print(f"[edit] {name}", file=sys.stderr, flush=True)
        corpora[name] = _with_load(bench_corpus, name, CORPORA[name])
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if sizes:
        synth_root = Path(tempfile.mkdtemp(prefix="bench-edit-synth-"))
        try:
            for size in sizes:
                print(f"[edit] synthetic {size}", file=sys.stderr, flush=True)
                vault = synthetic_vault(size, synth_root)
                corpora[f"synth_{size}"] = _with_load(bench_corpus, f"synth_{size}", vault)
        finally:
            shutil.rmtree(synth_root, ignore_errors=True)
    result = {
        **run_header(load_before),
        "edits_per_corpus": EDITS,
        "corpora": corpora,
    }
    print(write_json(args.out, result))


if __name__ == "__main__":
    main()
