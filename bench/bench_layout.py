"""Stored sparse layout, before and after (issue 29 step 1): per code tree and corpus, a cold build
(workers=1: wall clock and CPU time), the generation's bytes and those of its stored sparse group, and
warm ``fts`` latency (``search_vault``, limit 10, passages on; p50 and p95 of wall clock and CPU time of
the queries twice after 30 warm-ups).

Each code tree (``--code name=DIR``, a directory holding ``core/``; "now" is this tree) runs in its own
subprocess; the trees alternate for ``--rounds`` rounds (the machine is shared: compare medians).

    python -m bench.bench_layout --code before=/tmp/before [--rounds 3] [--corpus scifact] [--data /tmp/data]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import DATA_DIR

CORPORA = {  # (vault, queries) under the data folder
    "scifact": ("scifact/vault", "scifact/dev_queries.jsonl"),
    "powershell": ("powershell-docs/reference", "known-item/powershell_dev_queries.jsonl"),
}

_SCRIPT = """
import json, shutil, statistics, sys, time
from pathlib import Path
from core import generations as gen
from core.build.builder import build_index
from core.searcher import search_vault
vault, queries, index_dir = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
shutil.rmtree(index_dir, ignore_errors=True)
t, c = time.perf_counter(), time.process_time()
build_index(vault, index_dir=index_dir, workers=1)
build, build_cpu = time.perf_counter() - t, time.process_time() - c
segment_bytes = sum(p.size for p in gen.resolve(gen.layout_for(vault.resolve(), index_dir)).parts)
conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault.resolve(), index_dir)))
sparse = conn.execute("SELECT coalesce(sum(length(data)), 0) FROM term_major WHERE name LIKE 'sparse:%'").fetchone()[0]
qs = [json.loads(line)["text"] for line in queries.read_text().splitlines() if line.strip()]
for q in qs[:30]:
    search_vault(vault, q, mode="fts", limit=10, index_dir=index_dir)
times, cpu = [], []
for q in qs * 2:
    t, c = time.perf_counter(), time.process_time()
    search_vault(vault, q, mode="fts", limit=10, index_dir=index_dir)
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
times.sort()
cpu.sort()
print(json.dumps({"build_s": build, "build_cpu_s": build_cpu, "generation_bytes": segment_bytes,
                  "sparse_group_bytes": sparse, "p50_ms": statistics.median(times) * 1000,
                  "p95_ms": times[int(0.95 * len(times))] * 1000, "cpu_p50_ms": statistics.median(cpu) * 1000,
                  "cpu_p95_ms": cpu[int(0.95 * len(cpu))] * 1000}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--code", action="append", default=[], help="name=DIR: another code tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", action="append", choices=sorted(CORPORA), default=None)
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--data", type=Path, default=DATA_DIR, help="the corpora (a copy: the builds read it)")
    args = ap.parse_args()
    trees = {**dict(c.split("=", 1) for c in args.code), "now": str(Path(__file__).resolve().parents[1])}
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench_layout_"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for corpus in args.corpus or sorted(CORPORA):
            vault, queries = (args.data / part for part in CORPORA[corpus])
            for name, tree in trees.items():
                cmd = [sys.executable, "-c", _SCRIPT, str(vault), str(queries), str(work / f"{corpus}_{name}")]
                done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=True)
                got = json.loads(done.stdout.strip().splitlines()[-1])
                runs.setdefault(corpus, {}).setdefault(name, []).append(got)
                loads.append(os.getloadavg()[0])
                print(corpus, name, {k: round(v, 2) for k, v in got.items()}, flush=True)
    summary = {
        corpus: {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in by_tree.items()}
        for corpus, by_tree in runs.items()
    }
    print(json.dumps({"medians": summary, "load_1min": [min(loads), max(loads)], "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
