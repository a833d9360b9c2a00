"""Publish and first-search verification cost of two code trees (issue 29 storage step 1: manifests).

For each code tree given (e.g. the commit before the manifest format, exported with ``git archive``,
and this worktree), on a fresh copy of the SciFact vault with its own index:

1. ``vaultsearch index VAULT`` as a whole new process after a one-note edit (wall time around the
   subprocess, interpreter start-up included), one line appended to a different note each time;
   with its CPU time (the child and its workers: less sensitive to a loaded machine than wall time)
   and the build's own ``publish`` stage (``timings.publish`` of the report);
2. a new process's first ``resolve()`` right after the ``index`` process (``after_index``: the
   publisher's own record of its new part, if it leaves one) and again later (the verification a
   first search pays), timed inside the process after its imports: with the verification record in
   place (``record``) and with it deleted (``no_record``: every part hashed), and the whole first
   ``search`` process's wall time;
3. ``publish()`` alone, in process (wall and CPU), on a copy of the active segment with one row added.

Runs of the trees alternate edit by edit, so load drift on a shared machine hits both alike; medians.

    python -m bench.bench_manifest --tree before=/tmp/base --tree after=. [--edits 5] [--out PATH]
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, RESULTS_DIR, copy_vault, machine_info, write_json

CORPUS = DATA_DIR / "scifact" / "vault"
_INDEX = "import sys\nfrom core.cli import main\nsys.exit(main(sys.argv[1:]))\n"
_RESOLVE = (
    "import json, sys, time\n"
    "from pathlib import Path\n"
    "from core.index.layout import layout_for\n"
    "from core.index.verify import resolve, VERIFY_STATS\n"
    "t, c = time.perf_counter(), time.process_time()\n"
    "resolve(layout_for(Path(sys.argv[1])))\n"
    "print(json.dumps({'resolve_s': time.perf_counter() - t, 'resolve_cpu_s': time.process_time() - c,"
    " **VERIFY_STATS}))\n"
)

# ``publish()`` alone, timed in process: the active segment copied to staging, one row added so that
# its bytes are new (a new part, never the shared-name path), then published; argv: vault, rounds.
_PUBLISH = (
    "import json, shutil, sqlite3, sys, time\n"
    "from pathlib import Path\n"
    "from core.generations import GenerationRecord, active_record, build_lock, layout_for, new_staging_path,"
    " publish, resolve\n"
    "layout, out = layout_for(Path(sys.argv[1])), []\n"
    "for i in range(int(sys.argv[2])):\n"
    "    served = resolve(layout)\n"
    "    source = served.parts[0].path if getattr(served, 'parts', ()) else served.path\n"
    "    with build_lock(layout):\n"
    "        staged = new_staging_path(layout)\n"
    "        shutil.copyfile(source, staged)\n"
    "        conn = sqlite3.connect(staged)\n"
    "        conn.execute('CREATE TABLE IF NOT EXISTS bench_nonce (x)')\n"
    "        conn.execute('INSERT INTO bench_nonce VALUES (?)', (time.time_ns(),))\n"
    "        conn.commit()\n"
    "        conn.close()\n"
    "        base = active_record(layout)\n"
    "        record = GenerationRecord(base['source_snapshot_hash'], base['notes'], base['chunks'],"
    " base['dense_chunks'], base['chunker'], base['tokenizer'], {}, [])\n"
    "        t, c = time.perf_counter(), time.process_time()\n"
    "        publish(layout, staged, record, expected_base=base['generation_id'])\n"
    "        out.append((time.perf_counter() - t, time.process_time() - c))\n"
    "print(json.dumps(out))\n"
)


def _run(tree: Path, code: str, *args: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child and its reaped children, stdout) of one new process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=900
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: {args}: {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def _record_path(vault: Path) -> Path:
    return vault / ".vaultsearch" / "verified.json"


def _first_resolve(tree: Path, vault: Path, *, record: bool) -> dict[str, Any]:
    if not record:
        _record_path(vault).unlink(missing_ok=True)
    _, _, out = _run(tree, _RESOLVE, str(vault))
    return json.loads(out)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def measure(trees: dict[str, Path], edits: int, publish_rounds: int, work: Path) -> dict[str, Any]:
    notes = sorted(p for p in CORPUS.rglob("*.md") if p.is_file())
    vaults = {name: copy_vault(CORPUS, work / name / "vault") for name in trees}
    for name, tree in trees.items():
        _run(tree, _INDEX, "index", str(vaults[name]))  # cold build, not measured
    samples: dict[str, dict[str, list[float]]] = {
        name: {
            key: []
            for key in (
                "index_s",
                "index_cpu_s",
                "publish_s",
                "resolve_after_index_s",
                "resolve_record_s",
                "resolve_no_record_s",
            )
        }
        | {"search_process_s": []}
        for name in trees
    }
    hashes: dict[str, dict[str, int]] = {}
    for i in range(edits):
        rel = notes[(i * 7919) % len(notes)].relative_to(CORPUS)
        for name, tree in trees.items():
            vault = vaults[name]
            with open(vault / rel, "a", encoding="utf-8") as handle:
                handle.write(f"\nOne line appended by bench_manifest, edit {i}.\n")
            wall, cpu, out = _run(tree, _INDEX, "index", str(vault), "--json")
            samples[name]["index_s"].append(wall)
            samples[name]["index_cpu_s"].append(cpu)
            samples[name]["publish_s"].append(json.loads(out)["timings"]["publish"])
            after_index = _first_resolve(tree, vault, record=True)  # the first reader after the publish
            with_record = _first_resolve(tree, vault, record=True)
            wall, _, _ = _run(tree, _INDEX, "search", str(vault), "protein", "--mode", "fts", "--json")
            without = _first_resolve(tree, vault, record=False)
            samples[name]["resolve_after_index_s"].append(after_index["resolve_s"])
            samples[name]["resolve_record_s"].append(with_record["resolve_s"])
            samples[name]["resolve_no_record_s"].append(without["resolve_s"])
            samples[name]["search_process_s"].append(wall)
            hashes[name] = {
                "after_index": after_index["full_hashes"],
                "record": with_record["full_hashes"],
                "no_record": without["full_hashes"],
            }
    sizes = {
        name: sum(p.stat().st_size for p in (vaults[name] / ".vaultsearch").rglob("*") if p.is_file()) for name in trees
    }
    publish_only: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(publish_rounds):  # alternating trees, two publishes per process
        for name, tree in trees.items():
            publish_only[name] += json.loads(_run(tree, _PUBLISH, str(vaults[name]), "2")[2])
    out: dict[str, Any] = {}
    for name in trees:
        out[name] = {
            **{key: round(statistics.median(vals), 4) for key, vals in samples[name].items()},
            "samples": samples[name],
            "hashes_in_first_resolve": hashes[name],
            "publish_only_s": _median([w for w, _ in publish_only[name]]),
            "publish_only_cpu_s": _median([c for _, c in publish_only[name]]),
            "publish_only_samples": publish_only[name],
            "index_dir_bytes": sizes[name],  # after the edits (publishes seconds apart), before publish()-only
        }
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a code tree")
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--publish-rounds", type=int, default=5, help="rounds of publish() alone (2 per tree each)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "manifest.json")
    args = parser.parse_args(argv)
    trees = {spec.split("=", 1)[0]: Path(spec.split("=", 1)[1]).resolve() for spec in args.tree}
    work = Path(tempfile.mkdtemp(prefix="bench-manifest-"))
    try:
        result = {
            "machine": machine_info(),
            "corpus": str(CORPUS),
            "edits": args.edits,
            **measure(trees, args.edits, args.publish_rounds, work),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_json(args.out, result)
    print(
        json.dumps(
            {k: {m: v for m, v in r.items() if m != "samples"} for k, r in result.items() if k in trees}, indent=1
        )
    )


if __name__ == "__main__":
    main()
