"""A tombstone's statistics, in process: the whole arrays (before) against O(dead note) (issue 29,
core.build.tomb_stats).

Per corpus (a fresh copy built once, one segment) and per sampled note (mid-sized ids), it times:

- ``before``: what ``write_tombstone`` counted before: the sparse group loaded whole (every array of it) and
  ``dead_counts`` over all the postings, for the one dead note;
- ``after``: ``tomb_stats.tombstone_sums`` for the same note (no previous tombstone), and the pieces of
  ``docs`` it read against the array's pieces; the rows must be equal;
- ``cumulative``: ``write_tombstone_counted`` of a second dead note on top of the first one's tombstone
  (the edit path's case: a previous tombstone exists), the file written included.

    python -m bench.bench_tombstone [--corpus powershell|none] [--sizes 10000] [--built VAULT] [--notes 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_edit import CORPORA, synthetic_vault
from bench.common import RESULTS_DIR, copy_vault, machine_info, write_json
from core.build import tomb_stats
from core.build.builder import build_index
from core.build.segment_writer import write_tombstone, write_tombstone_counted
from core.index import verify
from core.index.layout import layout_for
from core.ranking import stored
from core.ranking.classes import CLASS_ARRAYS, class_stats_from
from core.ranking.segments import dead_counts
from core.ranking.sparse import SPARSE_GROUP

_BEFORE = ("note_ids", "indptr", "docs", "field_len", "df", *CLASS_ARRAYS)


def before_rows(segment: Path, ids: list[int]) -> tuple[list, list]:
    """The rows the writer computed before (a8574b2): the whole group loaded, every posting counted."""
    conn = sqlite3.connect(f"file:{segment}?mode=ro&immutable=1", uri=True)
    try:
        arrays = stored.load_group(conn, SPARSE_GROUP, _BEFORE)
    finally:
        conn.close()
    assert arrays is not None
    n_docs, fields, n_terms = arrays["note_ids"].shape[0], arrays["field_len"].shape[1], arrays["df"].shape[0]
    stats = class_stats_from(arrays, n_docs, fields, n_terms)
    rows = np.flatnonzero(np.isin(np.asarray(arrays["note_ids"], dtype=np.int64), ids))
    counted = dead_counts(stats, arrays["field_len"], arrays["indptr"], arrays["docs"], n_terms, rows)
    names = stats.names
    classes = [(name, int(counted.docs[c]), json.dumps(counted.field_len[c].tolist())) for c, name in enumerate(names)]
    cls, terms = np.nonzero(counted.df)
    df = [(names[c], int(t), int(counted.df[c, t])) for c, t in zip(cls.tolist(), terms.tolist(), strict=True)]
    return classes, df


def _segment(root: Path) -> tuple[Path, list[int], int, int]:
    """(the one segment, its note ids, its postings, the pieces of its docs array)."""
    part = verify.resolve(layout_for(root)).parts[0].path
    conn = sqlite3.connect(f"file:{part}?mode=ro&immutable=1", uri=True)
    try:
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM notes ORDER BY id")]
        names = [r[0] for r in conn.execute("SELECT name FROM term_major")]
        docs = stored.load_group(conn, SPARSE_GROUP, ("indptr",), only=True)
    finally:
        conn.close()
    assert docs is not None
    return part, ids, int(docs["indptr"][-1]), sum(1 for n in names if n.startswith(SPARSE_GROUP + "/docs#"))


def measure(root: Path, n_notes: int, work: Path) -> dict[str, Any]:
    segment, ids, postings, pieces = _segment(root)
    picks = [ids[len(ids) * (k + 1) // (n_notes + 2)] for k in range(n_notes)]
    read: list[str] = []
    real = stored.Reader.data

    def counting(self: stored.Reader, name: str) -> bytes | None:
        read.append(name)
        return real(self, name)

    stored.Reader.data = counting  # type: ignore[method-assign]
    before, after, cumulative, docs_read, how = [], [], [], [], []
    try:
        for k, nid in enumerate(picks):
            t = time.perf_counter()
            expected = before_rows(segment, [nid])
            before.append(time.perf_counter() - t)
            read.clear()
            t = time.perf_counter()
            sums = tomb_stats.tombstone_sums(segment, [nid])
            after.append(time.perf_counter() - t)
            docs_read.append(sum(1 for n in read if "/docs#" in n))
            if sums.rows() != expected:
                raise SystemExit(f"note {nid}: the tombstone rows differ from the whole count")
            first = work / f"first{k}.del"
            write_tombstone(first, segment, [nid])
            other = picks[(k + 1) % len(picks)]
            t = time.perf_counter()
            written = write_tombstone_counted(work / f"second{k}.del", segment, [nid, other], first)
            cumulative.append(time.perf_counter() - t)
            how += written.how
    finally:
        stored.Reader.data = real  # type: ignore[method-assign]
    return {
        "notes": len(ids),
        "postings": postings,
        "docs_pieces": pieces,
        "docs_pieces_read_median": statistics.median(docs_read),
        "before_ms_median": 1000 * statistics.median(before),
        "after_ms_median": 1000 * statistics.median(after),
        "cumulative_write_ms_median": 1000 * statistics.median(cumulative),
        "how": sorted(set(how)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="powershell", help="a bench_edit corpus name, or none")
    parser.add_argument("--sizes", default="", help="comma-separated synthetic vault sizes (e.g. 10000)")
    parser.add_argument("--notes", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "tombstone.json")
    parser.add_argument("--built", type=Path, action="append", default=[], help="a vault built already (repeatable)")
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": machine_info(), "load_avg_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="vs-tomb-") as tmp:
        for root in args.built:
            work = Path(tmp) / f"{root.name}-work"
            work.mkdir()
            results[root.name] = measure(root, args.notes, work)
            print(json.dumps({root.name: results[root.name]}), flush=True)
        vaults = [] if args.corpus == "none" else [(args.corpus, CORPORA[args.corpus])]
        for name, src in vaults + [(f"synthetic_{s}", None) for s in args.sizes.split(",") if s.strip()]:
            if src is None:
                root = synthetic_vault(int(name.rsplit("_", 1)[1]), Path(tmp) / name)
            else:
                root = copy_vault(src, Path(tmp) / name)
            print(f"[tombstone] build {name}", file=sys.stderr, flush=True)
            build_index(root)
            work = Path(tmp) / f"{name}-work"
            work.mkdir()
            results[name] = measure(root, args.notes, work)
            print(json.dumps({name: results[name]}), flush=True)
    results["load_avg_after"] = os.getloadavg()
    write_json(args.out, results)


if __name__ == "__main__":
    main()
