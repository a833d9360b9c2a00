"""Reading a generation of K segments with tombstones through one connection (issue 29, step 2a).

Splits a built vault's one-segment generation into K segments (``write_segment``), tombstones 2% of the
notes (``write_tombstone``), publishes each layout into its own index directory and times the read
path's queries through the views against the one-segment generation, plus the connect (resolve
cached) and the writing of the parts.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_segments.py /tmp/scifact --ks 1 4 11 --runs 200
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from core.build.lock import build_lock
from core.build.publish_segments import publish_segments, stage_split
from core.index import verify
from core.index.layout import GenerationRecord, ResolvedIndex, layout_for
from core.index.tables import notes_fts
from core.index.tables.meta import get_meta
from core.index.tables.notes import count_notes


def _publish(vault: Path, index_dir: Path, segment: Path, groups: list[list[int]], dead: set[int], tok: str) -> float:
    layout = layout_for(vault, index_dir)
    t = time.perf_counter()
    with build_lock(layout):
        segs, stones, _live = stage_split(layout, segment, groups, dead, tok)
        record = GenerationRecord("bench", 0, 0, 0, "c", tok, {}, [])
        publish_segments(layout, segs, stones, record, next_ids=(10**9, 10**9), expected_base=None, grace_s=0.0)
    return time.perf_counter() - t


def _ms(fn: Callable[[], object], runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.mean(times) * 1000


def _queries(conn: sqlite3.Connection, ids: list[int]) -> dict[str, Callable[[], object]]:
    some = ids[:: max(1, len(ids) // 20)][:20]
    marks = ", ".join("?" * len(some))
    return {
        "notes by 20 ids": lambda: conn.execute(f"SELECT * FROM notes WHERE id IN ({marks})", some).fetchall(),
        "path range": lambda: conn.execute("SELECT id FROM notes WHERE rel_path >= '1' AND rel_path < '2'").fetchall(),
        "count(*) notes": lambda: conn.execute("SELECT count(*) FROM notes").fetchone(),
        "chunks of 20 notes": lambda: conn.execute(f"SELECT * FROM chunks WHERE note_id IN ({marks})", some).fetchall(),
        "texts of 20 notes": lambda: notes_fts.note_texts(conn, some),
        "fts rowids 'cell'": lambda: notes_fts.matching_rowids(conn, "cell"),
        "fts + tag clause": lambda: notes_fts.matching_note_ids(
            conn, "protein OR gene", "n.id NOT IN (SELECT note_id FROM note_tags WHERE tag = 'x')", []
        ),
    }


def _time_reads(rows: dict[str, dict[int, float]], k: int, resolved: ResolvedIndex, ids: list[int], runs: int) -> None:
    rows.setdefault("connect (ms)", {})[k] = _ms(lambda: verify.connect_readonly(resolved).close(), 20)
    conn = verify.connect_readonly(resolved)
    for name, fn in _queries(conn, ids).items():
        rows.setdefault(f"{name} (ms)", {})[k] = _ms(fn, runs)
    rows.setdefault("count_notes (ms)", {})[k] = _ms(lambda: count_notes(conn), runs)
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("vault", type=Path, help="a vault with a built one-segment generation")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 4, 11])
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    base = verify.resolve(layout_for(args.vault))
    work = Path(tempfile.mkdtemp(prefix="bench-seg-"))
    segment = work / "base.seg"
    shutil.copyfile(base.parts[0].path, segment)
    conn = sqlite3.connect(segment)
    ids = [r[0] for r in conn.execute("SELECT id FROM notes ORDER BY id")]
    tok = get_meta(conn)["tokenizer"]
    conn.close()
    rng = random.Random(0)
    dead = set(rng.sample(ids, len(ids) // 50))
    rows: dict[str, dict[int, float]] = {}
    _time_reads(rows, 0, base, ids, args.runs)  # K=0: the one-segment generation as built, no tombstone
    for k in args.ks:
        cuts = [len(ids) * i // k for i in range(k + 1)]
        groups = [ids[cuts[i] : cuts[i + 1]] for i in range(k)]
        index_dir = work / f"k{k}"
        rows.setdefault("write + publish (s)", {})[k] = _publish(args.vault, index_dir, segment, groups, dead, tok)
        _time_reads(
            rows, k, verify.resolve(layout_for(args.vault, index_dir)), [i for i in ids if i not in dead], args.runs
        )
    print(f"{len(ids)} notes, {len(dead)} tombstoned; mean of {args.runs} runs")
    ks = [0, *args.ks]
    print("| query | one segment as built | " + " | ".join(f"K={k} + tombstones" for k in args.ks) + " |")
    print("|---|" + "---|" * len(ks))
    for name, by_k in rows.items():
        print(f"| {name} | " + " | ".join(f"{by_k[k]:.3f}" if k in by_k else "-" for k in ks) + " |")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
