"""New-process latency: the wall time of a whole ``vaultsearch search VAULT Q --mode M`` command, beside
bm25s and tantivy-py opening their saved indexes in a new process, in the same run (issue #14).

Each engine answers the same ten queries, one new process per query; the figure is the median of those
ten wall times (after one untimed warm-up run that fills the OS page cache and, for vaultsearch, leaves
the verification record). Floors in the same run: ``python -c pass`` and ``python -c "import numpy"``.
``import core.searcher`` is timed with ``python -X importtime`` (median of ten).

``--code LABEL=DIR`` (repeatable) runs the vaultsearch source tree in DIR (e.g. an export of main
beside this checkout, for a before/after in one run); each tree gets its own index (``--index LABEL=DIR``:
an index already built by that tree, e.g. of the 100k-note synthetic vault). ``--queries FILE`` (a JSON
list of strings) replaces the PowerShell queries. Every figure is also given as a ratio to the bare
``import numpy`` process of the same run (``x_numpy``), which is what a loaded machine moves least. All engines run
interleaved, query by query, so the load of a shared machine falls on each alike. The editable install's import hook
is removed in the child so that DIR really is what runs.

    python -m bench.bench_coldstart                                   # this checkout, as "after"
    python -m bench.bench_coldstart --code before=/tmp/main --code after=.   # both, interleaved
    python -m bench.bench_coldstart --vault /tmp/synth100k --index after=/tmp/idx100k --queries q.json \
        --modes fts,vector,hybrid --no-baselines --out bench/results/coldstart_100k.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.baselines import iter_vault_notes
from bench.common import DATA_DIR, REPO_ROOT, RESULTS_DIR, machine_info

POWERSHELL = DATA_DIR / "powershell-docs" / "reference"
QUERIES = (
    "Get-ChildItem recurse filter",
    "remove item force",
    "invoke web request headers",
    "execution policy",
    "start process and wait",
    "convert to json depth",
    "select object property",
    "new psdrive",
    "test network connection",
    "set location stack",
)
RUNS = len(QUERIES)
OUT = RESULTS_DIR / "coldstart.json"

# The child launcher: drop the editable install's finder so that ``code`` (first on sys.path) is imported.
LAUNCH = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__.lower()]\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "from core.cli import main\n"
    "sys.argv[0] = 'vaultsearch'\n"
    "sys.exit(main())\n"
)
IMPORT_PROBE = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__.lower()]\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "import core.searcher\n"
)
BM25S_QUERY = """
import json, sys
import bm25s, Stemmer
d = sys.argv[1]
paths = json.load(open(d + "/paths.json"))
retriever = bm25s.BM25.load(d)
tokens = bm25s.tokenize([sys.argv[2]], stopwords="en", stemmer=Stemmer.Stemmer("english").stemWords,
                        show_progress=False)
docs, scores = retriever.retrieve(tokens, k=10, show_progress=False)
print("\\n".join(paths[int(i)] for i, s in zip(docs[0], scores[0]) if s > 0))
"""
TANTIVY_QUERY = """
import sys
import tantivy
index = tantivy.Index.open(sys.argv[1])
searcher = index.searcher()
query, _errors = index.parse_query_lenient(sys.argv[2], ["title", "body"])
for _score, address in searcher.search(query, 10).hits:
    print(searcher.doc(address)["path"][0])
"""


def wall(cmd: Sequence[str]) -> float:
    """Seconds of one whole command (process start to exit); a failing command raises."""
    return timed_run(cmd)[0]


def timed_run(cmd: Sequence[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + system) of one whole command; a failing command raises. CPU time
    is what a loaded machine disturbs least, so it is kept beside the wall time."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=CHILD_ENV)
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - _CPU_SEEN[0]
    _CPU_SEEN[0] = usage.ru_utime + usage.ru_stime
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    return seconds, cpu


_CPU_SEEN = [0.0]  # RUSAGE_CHILDREN is cumulative: the CPU of all children waited for so far
# Children may read bytecode but this environment sets PYTHONDONTWRITEBYTECODE: the trees are compiled once
# up front (compile_tree), as an installed package is, so no run pays for compiling sources.
CHILD_ENV = dict(os.environ)


def compile_tree(code: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "core")], check=True, capture_output=True)


def interleaved(engines: dict[str, Any], queries: Sequence[str] = QUERIES) -> dict[str, dict[str, Any]]:
    """One untimed warm-up per engine, then round-robin: query i runs once on every engine before query
    i + 1, so the load of a shared machine falls on all engines alike. Median and samples (seconds)."""
    for make_cmd in engines.values():
        wall(make_cmd(queries[0]))
    walls: dict[str, list[float]] = {name: [] for name in engines}
    cpus: dict[str, list[float]] = {name: [] for name in engines}
    for query in queries:
        for name, make_cmd in engines.items():
            seconds, cpu = timed_run(make_cmd(query))
            walls[name].append(seconds)
            cpus[name].append(cpu)
    return {
        name: {
            "median_s": round(statistics.median(walls[name]), 4),
            "samples_s": [round(x, 4) for x in walls[name]],
            "cpu_median_s": round(statistics.median(cpus[name]), 4),
        }
        for name in engines
    }


def vaultsearch_cmd(code: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCH, str(code), *args]


def build_vaultsearch(code: Path, vault: Path, index_dir: Path) -> float:
    if (index_dir / "state.db").exists():
        return 0.0
    return wall(vaultsearch_cmd(code, "index", str(vault), "--index-dir", str(index_dir)))


def build_bm25s(vault: Path, out: Path) -> None:
    """bm25s's saved index of the vault in ``out``, unless an earlier run left one there."""
    if not (out / "paths.json").exists():
        save_bm25s(vault, out)


def save_bm25s(vault: Path, out: Path) -> None:
    """bm25s's whole write path (it has no update): read every note, tokenize (English stopwords,
    Snowball), index, and save the index with the notes' paths to ``out`` (overwriting what is there)."""
    import bm25s
    import Stemmer

    notes = list(iter_vault_notes(vault))
    tokens = bm25s.tokenize(
        [f"{t}\n{b}" for _, t, b in notes],
        stopwords="en",
        stemmer=Stemmer.Stemmer("english").stemWords,
        show_progress=False,
    )
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    retriever.save(str(out))
    (out / "paths.json").write_text(json.dumps([rel for rel, _, _ in notes]), encoding="utf-8")


def build_tantivy(vault: Path, out: Path) -> None:
    import tantivy

    if (out / "meta.json").exists():
        return
    out.mkdir(parents=True, exist_ok=True)
    schema = (
        tantivy.SchemaBuilder()
        .add_text_field("path", stored=True, tokenizer_name="raw")
        .add_text_field("title", stored=False, tokenizer_name="en_stem")
        .add_text_field("body", stored=False, tokenizer_name="en_stem")
        .build()
    )
    index = tantivy.Index(schema, path=str(out))
    writer = index.writer()
    for rel, title, body in iter_vault_notes(vault):
        writer.add_document(tantivy.Document(path=rel, title=title, body=body))
    writer.commit()
    writer.wait_merging_threads()


def import_time_ms(code: Path, runs: int = RUNS) -> dict[str, Any]:
    """``import core.searcher`` (cumulative microseconds of python -X importtime, top line), median of ``runs``."""
    samples = []
    for _ in range(runs + 1):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", IMPORT_PROBE, str(code)], capture_output=True, text=True
        )
        lines = [line for line in proc.stderr.splitlines() if line.rstrip().endswith("| core.searcher")]
        samples.append(int(lines[-1].split("|")[1]) / 1000.0)
    samples = samples[1:]  # the first run also writes .pyc files
    return {
        "median_ms": round(statistics.median(samples), 1),
        "min_ms": round(min(samples), 1),
        "samples_ms": [round(s, 1) for s in samples],
    }


def with_ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Each engine's median and each tree's import time as a multiple of the bare ``import numpy`` process."""
    floor = result["engines"]["python -c 'import numpy'"]["median_s"]
    for figures in result["engines"].values():
        figures["x_numpy"] = round(figures["median_s"] / floor, 2)
    for figures in result["import_core_searcher"].values():
        figures["x_numpy"] = round(figures["median_ms"] / 1000.0 / floor, 2)
    return result


def run(
    trees: dict[str, Path],
    work: Path,
    vault: Path,
    modes: Sequence[str],
    baselines: bool,
    queries: Sequence[str] = QUERIES,
    indexes: dict[str, Path] | None = None,
) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    engines: dict[str, Any] = {
        "python -c pass": lambda q: [sys.executable, "-c", "pass"],
        "python -c 'import numpy'": lambda q: [sys.executable, "-c", "import numpy"],
    }
    builds, imports = {}, {}
    for label, code in trees.items():
        compile_tree(code)
        index_dir = (indexes or {}).get(
            label
        ) or work / f"vaultsearch-{hashlib.sha256(str(code.resolve()).encode()).hexdigest()[:10]}"
        builds[label] = round(build_vaultsearch(code, vault, index_dir), 2)
        imports[label] = import_time_ms(code)
        for mode in modes:
            engines[f"vaultsearch {mode} ({label})"] = lambda q, c=code, m=mode, d=index_dir: vaultsearch_cmd(
                c, "search", str(vault), q, "--mode", m, "--index-dir", str(d)
            )
    if baselines:
        build_bm25s(vault, work / "bm25s")
        build_tantivy(vault, work / "tantivy")
        engines["bm25s"] = lambda q: [sys.executable, "-c", BM25S_QUERY, str(work / "bm25s"), q]
        engines["tantivy-py"] = lambda q: [sys.executable, "-c", TANTIVY_QUERY, str(work / "tantivy"), q]
    time.sleep(0.1)  # past the racy window, so each warm-up run may leave a verification record
    return with_ratios(
        {
            "trees": {label: str(code) for label, code in trees.items()},
            "vault": str(vault),
            "notes": sum(1 for _ in vault.rglob("*.md")),
            "queries": list(queries),
            "index_build_s": builds,
            "import_core_searcher": imports,
            "engines": interleaved(engines, queries),
            "load_avg_after": round(os.getloadavg()[0], 2),
        }
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--code",
        action="append",
        metavar="LABEL=DIR",
        help="a vaultsearch source tree to run (repeatable; default: this checkout as 'after')",
    )
    parser.add_argument("--vault", type=Path, default=POWERSHELL)
    parser.add_argument("--work", type=Path, default=Path("/tmp/vaultsearch-coldstart"))
    parser.add_argument("--modes", default="fts,hybrid")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--index", action="append", metavar="LABEL=DIR", help="an existing index for a tree")
    parser.add_argument("--queries", type=Path, help="a JSON list of query strings (default: the PowerShell ten)")
    args = parser.parse_args(argv)
    trees = dict(item.split("=", 1) for item in args.code) if args.code else {"after": str(REPO_ROOT)}
    indexes = {k: Path(v) for k, v in (item.split("=", 1) for item in args.index or ())}
    queries = json.loads(args.queries.read_text(encoding="utf-8")) if args.queries else QUERIES
    result = run(
        {k: Path(v) for k, v in trees.items()},
        args.work,
        args.vault,
        args.modes.split(","),
        not args.no_baselines,
        queries,
        indexes,
    )
    data = {"machine": machine_info(), **result, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for name, figures in result["engines"].items():
        print(
            f"{name:40s} {figures['median_s']:.3f} s  cpu {figures['cpu_median_s']:.3f} s  {figures['x_numpy']:.2f}x numpy"
        )
    for label, figures in result["import_core_searcher"].items():
        print(f"import core.searcher ({label}): {figures['median_ms']} ms  {figures['x_numpy']:.2f}x numpy")


if __name__ == "__main__":
    main()
