"""Watcher edit-to-searchable benchmark (issue 29): a running ``vaultsearch watch``, a long-lived reader.

The user path for "my edits become searchable by themselves" is ``vaultsearch watch VAULT`` beside
whatever searches (``serve --watch`` and ``mcp --watch`` run the same ``Watcher`` in their own
process; ``core/build/watch.py``). Per corpus (a fresh copy in a temporary folder, the index in a
folder beside it):

1. ``vaultsearch index`` builds the index cold, as a new process (timed, reported, not the point);
2. ``vaultsearch watch VAULT --index-dir DIR --json`` starts as a subprocess (this checkout's code)
   and its first build (up to date) is waited for;
3. this process is the long-lived reader: ``search_vault`` (fts, freshness on, as a library caller
   uses it) warmed on a few queries, then per edit: one line holding a word no note holds
   (letters only: the analyzer cuts digits off) appended to a different mid-sized note, and
   ``search_vault`` for that word polled every 20 ms until the edited note is a hit for the word
   itself (not through an expansion to an earlier edit's word). Edit-to-searchable is the time
   from the write to that response. Then the watcher's build of the note is waited for (its
   ``--json`` line names the note), 0.3 s more so the build's retention is done, and:
4. bytes written per edit: the index directory walked before the edit and after (new or changed
   files counted whole, ``bench_edit.bytes_written``) and the watcher process's own ``/proc/PID/io``
   counters (``write_bytes``, ``wchar``) before and after.

p50 / p95 / max over the edits (``core.eval.metrics.percentile``). Results: ``bench/results/watch.json``
(``bench/report_edit.py`` renders them). At 100k notes (``--sizes 100000``) today's code needs
about a minute a build: 20 edits plus the cold build are well over the quarter hour.

    python -m bench.bench_watch [--corpus powershell[,mdn,...]|none] [--sizes 10000] [--edits 20] [--out PATH]
        [--reuse VAULT]

``--reuse VAULT``: a vault already built with its index in its default folder (a copy: it is edited in
place), no cold index (at 100k notes one costs 450-750 s here). Per edit the time is also split
(``edit_split``): the write to the watcher's build start, the build, the build's end to the hit, and
the one search that found the note (the reader's switch).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.bench_edit import (
    CORPORA,
    bytes_written,
    mid_sized,
    parse_proc_io,
    run_header,
    run_index,
    synthetic_vault,
    walk_files,
)
from bench.common import REPO_ROOT, RESULTS_DIR, copy_vault, write_json
from core.eval.metrics import percentile

EDITS = 20
POLL_S = 0.02
SETTLE_S = 0.3
TIMEOUT_S = 900.0
FIRST_BUILD_TIMEOUT_S = 3600.0
# ``vaultsearch watch`` from this checkout (PYTHONPATH wins over the venv's editable install of main).
_WATCH_CHILD = "import sys\nfrom core.cli import main\nsys.exit(main(sys.argv[1:]))\n"


# ---------------------------------------------------------------- pure helpers (tested)


def marker(i: int) -> str:
    """The unique word of edit ``i``: letters only (the analyzer cuts letters from digits, and a digit
    run occurs in other notes), four base-26 letters after a prefix no corpus holds."""
    if not 0 <= i < 26**4:
        raise ValueError(f"edit number out of range: {i}")
    return "zqxedit" + "".join(chr(97 + (i // 26**k) % 26) for k in range(4))


def seconds_stats(seconds: Sequence[float]) -> dict[str, Any]:
    """p50 / p95 / max / mean of a sample in seconds (``percentile`` interpolates, as everywhere)."""
    if not seconds:
        raise ValueError("seconds_stats needs at least one sample")
    values = list(seconds)
    return {
        "p50_s": round(percentile(values, 50), 3),
        "p95_s": round(percentile(values, 95), 3),
        "max_s": round(max(values), 3),
        "mean_s": round(sum(values) / len(values), 3),
        "n": len(values),
    }


def bytes_stats(values: Sequence[int | None]) -> dict[str, Any] | None:
    """Median and max of per-edit byte counts; ``None`` when any edit has no figure (counters unreadable)."""
    if not values or any(v is None for v in values):
        return None
    present = [int(v) for v in values if v is not None]
    return {"median": statistics.median(present), "max": max(present), "n": len(present)}


def io_delta(before: Mapping[str, int] | None, after: Mapping[str, int] | None) -> dict[str, int | None]:
    """What a process wrote between two ``/proc/PID/io`` readings (``None`` for a counter not in both)."""
    out: dict[str, int | None] = {}
    for key in ("write_bytes", "wchar"):
        have = before is not None and after is not None and key in before and key in after
        out[key] = after[key] - before[key] if have and before is not None and after is not None else None
    return out


def parse_outcome(line: str) -> dict[str, Any]:
    """One ``vaultsearch watch --json`` line: a build's outcome (``ok``, ``changed_paths``, ``seconds``, ...)."""
    data = json.loads(line)
    if not isinstance(data, dict) or "ok" not in data:
        raise ValueError(f"not a watch build outcome: {line[:200]!r}")
    return data


def covers(outcome: Mapping[str, Any], rel: str) -> bool:
    """Did this (successful) build take in the note ``rel``?"""
    return bool(outcome.get("ok")) and rel in (outcome.get("changed_paths") or ())


def reflected(paths: Sequence[str], expansions: Sequence[Any], rel: str) -> bool:
    """Does a response for an edit's word show the edit: the note is a hit for the word itself (a word
    the index lacks is expanded to similar ones, an earlier edit's word among them)?"""
    return rel in paths and not expansions


# ---------------------------------------------------------------- the watcher process


class WatchProcess:
    """``vaultsearch watch VAULT --index-dir DIR --json`` as a subprocess; its build lines in a queue."""

    def __init__(self, vault: Path, index_dir: Path) -> None:
        cmd = [sys.executable, "-c", _WATCH_CHILD, "watch", str(vault), "--index-dir", str(index_dir), "--json"]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        self.proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.outcomes: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout or ():
            if line.strip():
                self.outcomes.put(parse_outcome(line))

    def _read_stderr(self) -> None:
        for line in self.proc.stderr or ():
            self.stderr = [*self.stderr[-200:], line]

    def tail(self) -> str:
        return "".join(self.stderr[-40:])

    def next_outcome(self, timeout: float) -> dict[str, Any]:
        """The next build line; a watcher that died or stayed silent for ``timeout`` raises."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                return self.outcomes.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"vaultsearch watch exited {self.proc.returncode}:\n{self.tail()}") from None
        raise RuntimeError(f"no watch build line within {timeout:.0f} s:\n{self.tail()}")

    def wait_covering(self, rel: str, timeout: float) -> dict[str, Any]:
        """The first build line (from now or queued) that took in ``rel``; a failed build raises."""
        end = time.monotonic() + timeout
        while True:
            outcome = self.next_outcome(max(1.0, end - time.monotonic()))
            if not outcome.get("ok"):
                raise RuntimeError(f"watch build failed: {outcome}")
            if covers(outcome, rel):
                return outcome

    def proc_io(self) -> dict[str, int] | None:
        try:
            return parse_proc_io(Path(f"/proc/{self.proc.pid}/io").read_text(encoding="ascii"))
        except OSError:
            return None

    def memory_kib(self) -> dict[str, int] | None:
        """The watcher process's resident memory now and at its peak (``VmRSS``, ``VmHWM``: KiB)."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text(encoding="ascii")
        except OSError:
            return None
        return parse_vm_status(status)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(60)


# ---------------------------------------------------------------- one corpus


def _search(vault: Path, index_dir: Path, word: str) -> Any:
    from core.searcher import search_vault

    return search_vault(vault, word, 10, "fts", index_dir=index_dir, passages=False)


def _until_searchable(vault: Path, index_dir: Path, rel: str, word: str, watch: WatchProcess) -> dict[str, Any]:
    """Poll the reader until the note is a hit for ``word``: seconds from now, polls, the hit's freshness."""
    start = time.perf_counter()
    polls = 0
    while True:
        asked = time.perf_counter()
        res = _search(vault, index_dir, word)
        polls += 1
        if reflected([h.rel_path for h in res.hits], res.query_expansions, rel):
            fresh, now = dict(res.freshness), time.perf_counter()
            return {"seconds": now - start, "polls": polls, "freshness": fresh, "last_search": now - asked}
        if time.perf_counter() - start > TIMEOUT_S:
            raise RuntimeError(f"{rel} not searchable for {word} after {TIMEOUT_S:.0f} s:\n{watch.tail()}")
        time.sleep(POLL_S)


def one_edit(vault: Path, index_dir: Path, watch: WatchProcess, rel: str, number: int) -> dict[str, Any]:
    """Append the edit's word to ``rel``, time it to searchable, then the bytes its build wrote."""
    word = marker(number)
    walk_before, io_before = walk_files(index_dir), watch.proc_io()
    written = time.time()
    with (vault / rel).open("a", encoding="utf-8") as fh:
        fh.write(f"\nThis line was appended by the watch benchmark: {word}.\n")
    found = _until_searchable(vault, index_dir, rel, word, watch)
    build = watch.wait_covering(rel, TIMEOUT_S)
    split = edit_split(written, found["seconds"], build, found["last_search"])
    time.sleep(SETTLE_S)
    walk = bytes_written(walk_before, walk_files(index_dir))
    io = io_delta(io_before, watch.proc_io())
    return {
        "note": rel,
        "word": word,
        "edit_to_searchable_s": round(found["seconds"], 3),
        "polls": found["polls"],
        "freshness_source": found["freshness"].get("source"),
        "stale": found["freshness"].get("stale"),
        "build_seconds": build.get("seconds"),
        **split,
        "walk": walk,
        "proc_write_bytes": io["write_bytes"],
        "proc_wchar": io["wchar"],
    }


def edit_split(written: float, searchable_s: float, build: Mapping[str, Any], last_search_s: float) -> dict[str, float]:
    """Where an edit's time to searchable went: ``event_to_build_s`` (the write to the watcher's build start:
    the file event, watchfiles' step and debounce, a build already running), the build (its own line),
    ``after_build_s`` (the build's end to the reader's hit: negative when the reader switched before the
    build ended, which publishes before its retention step) and ``last_search_s`` (the search that found
    the note: the reader's switch to the new generation, freshness and ranking)."""
    started = float(build.get("at") or written)
    ended = started + float(build.get("seconds") or 0.0)
    return {
        "event_to_build_s": round(started - written, 3),
        "after_build_s": round(written + searchable_s - ended, 3),
        "last_search_s": round(last_search_s, 3),
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    sources: dict[str, int] = {}
    for r in runs:
        sources[str(r["freshness_source"])] = sources.get(str(r["freshness_source"]), 0) + 1
    return {
        "edit_to_searchable": seconds_stats([r["edit_to_searchable_s"] for r in runs]),
        "build_seconds": seconds_stats([float(r["build_seconds"] or 0.0) for r in runs]),
        **{k: seconds_stats([r[f"{k}_s"] for r in runs]) for k in ("event_to_build", "after_build", "last_search")},
        "walk_bytes": bytes_stats([r["walk"]["bytes"] for r in runs]),
        "proc_write_bytes": bytes_stats([r["proc_write_bytes"] for r in runs]),
        "proc_wchar": bytes_stats([r["proc_wchar"] for r in runs]),
        "freshness_sources": sources,
    }


def bench_corpus(name: str, vault: Path, tmp: Path, edits: int, reuse_index: Path | None = None) -> dict[str, Any]:
    """Cold index (unless ``reuse_index``: an index of ``vault`` already built), the watcher started, the
    reader warmed, then ``edits`` edits one after another."""
    files = sorted(
        (p.relative_to(vault).as_posix(), p.stat().st_size)
        for p in vault.rglob("*.md")
        if p.is_file() and ".vaultsearch" not in p.relative_to(vault).parts
    )
    picks = mid_sized(files, edits)
    index_dir = reuse_index or tmp / "index"
    load_before = os.getloadavg()[0]
    cold = {"wall_seconds": None} if reuse_index else run_index(vault, index_dir, tmp / "io-cold.txt")
    watch = WatchProcess(vault, index_dir)
    try:
        first = watch.next_outcome(FIRST_BUILD_TIMEOUT_S)
        for word in ("index", "note", "search"):
            _search(vault, index_dir, word)  # the reader's caches, as a long-lived process has them
        print(f"[watch] {name}: watcher up; {edits} edits", file=sys.stderr, flush=True)
        runs = [one_edit(vault, index_dir, watch, rel, i) for i, rel in enumerate(picks)]
        memory = watch.memory_kib()
    finally:
        watch.close()
    return {
        "notes": len(files),
        "markdown_bytes": sum(size for _rel, size in files),
        "cold_index_seconds": None if cold["wall_seconds"] is None else round(cold["wall_seconds"], 3),
        "first_watch_build": {k: first.get(k) for k in ("ok", "up_to_date", "seconds")},
        **_summary(runs),
        "edits": runs,
        "watcher_memory_kib": memory,  # after the last edit: what the watcher holds between builds, and its peak
        "load_avg_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
    }


def parse_vm_status(status: str) -> dict[str, int]:
    """``{"rss": VmRSS, "peak_rss": VmHWM}`` (KiB) from the text of ``/proc/PID/status``."""
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        key: int(fields[name].split()[0]) for key, name in (("rss", "VmRSS"), ("peak_rss", "VmHWM")) if name in fields
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="powershell", help=f"comma list of {', '.join(CORPORA)}, or none")
    parser.add_argument("--sizes", default="", help="comma-separated synthetic vault sizes (e.g. 10000)")
    parser.add_argument("--edits", type=int, default=EDITS, help=f"edits per corpus (default {EDITS})")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "watch.json")
    parser.add_argument(
        "--reuse", type=Path, default=None, help="a built vault (a copy: edited in place), no cold index"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    names = [n for n in args.corpus.split(",") if n and n != "none"]
    if unknown := sorted(set(names) - set(CORPORA)):
        parser.error(f"unknown corpora: {unknown}")
    load_before = os.getloadavg()
    corpora: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    try:
        for name in names:
            print(f"[watch] {name}", file=sys.stderr, flush=True)
            vault = copy_vault(CORPORA[name], work / name / "vault")
            corpora[name] = bench_corpus(name, vault, work / name, args.edits)
        for size in sizes:
            print(f"[watch] synthetic {size}", file=sys.stderr, flush=True)
            name = f"synth_{size}"
            (work / name).mkdir()
            corpora[name] = bench_corpus(name, synthetic_vault(size, work / name), work / name, args.edits)
        if args.reuse is not None:
            from core.index.layout import layout_for

            print(f"[watch] reused {args.reuse}", file=sys.stderr, flush=True)
            vault = args.reuse.resolve()
            corpora[f"reused_{vault.name}"] = bench_corpus(
                vault.name, vault, work, args.edits, reuse_index=layout_for(vault).index_dir
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        **run_header(load_before),
        "edits_per_corpus": args.edits,
        "poll_ms": POLL_S * 1000,
        "settle_s": SETTLE_S,
        "corpora": corpora,
    }
    print(write_json(args.out, result))


if __name__ == "__main__":
    main()
