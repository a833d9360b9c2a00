"""Language benchmark (issue 13): per language and query kind on the multilingual MDN dev sets,
beside the baselines of ``baselines_dev.json``; the English sets; typo and prefix sets; p50s;
SciFact cold build time and index size.

* multilingual: each ``vault/<lang>/`` is its own vault, indexed with default settings
  (notes' languages detected); every dev set of that language is run through ``search_vault``
  (fts and hybrid, 10 hits): nDCG@10 and the share of queries with no hit at all.
* English: SciFact dev and the Dendron / PowerShell known-item dev sets, fts and hybrid.
* typo: every known-item dev query with one edit (insert, delete, swap or substitute, seeded
  ``random.Random(13)``) in one of its words of >= 5 letters; reported as the ratio of its
  nDCG@10 to the unedited queries' (fts).
* prefix: each known-item dev query with its rarest word of >= 6 letters (that its note holds)
  cut to its first 3, 4 or 5 letters (seeded); share of queries whose note is in the top 10
  (fts), beside the same queries without that word at all (what the other words find alone).
* sets (issue 26, ``bench.bench_sets``): nDCG@10 and zero-hit rate of every query set (MDN, known-item
  heading / typo / prefix / word start, SciFact dev and train), each ``--code`` tree and this one
  beside FTS5 trigram and bm25s measured in the same run (``--corpora`` runs some corpora only).
* latency: warm fts p50 per set (``limit=10``, passages on, the realistic call), wall clock and CPU time.
* build: SciFact cold build (fresh index dir, in this process), seconds and generation size.
* build_vs: the same against the first ``--code`` tree (the "before" of the build ratio), the trees
  alternated for ``--rounds`` rounds in subprocesses: wall clock (default workers) and CPU time of a
  build with workers=1 (what the ratio is judged on: wall clock swings with the machine's load).
* instructions: instructions (valgrind's callgrind) per warm SciFact fts query and per SciFact cold
  build (workers=1), per code tree: repeatable where CPU time is not (needs ``valgrind``); for a tree
  that stores term-major arrays for readers (issue 14), also its build without storing them.
* latency: SciFact fts p50 as CPU time (``time.process_time``) of warm ``search_vault`` calls
  (limit 10, passages on; 150 dev queries x2 after 30 warm-up calls), each code tree named by
  ``--code name=DIR`` (a directory holding ``core/``, e.g. a ``git archive`` of main) in its own
  subprocess on an index it built, the trees alternated for ``--rounds`` rounds; this tree is "now".

Timings are taken on whatever load the machine has; the JSON records the load average.

    python -m bench.bench_lang [--work-dir DIR] [--only multilingual,english,typo,prefix,build,build_vs,latency,instructions,sets]
                               [--code before=DIR ...] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, RESULTS_DIR, load_qrels, load_queries, machine_info, write_json
from core import generations as gen
from core.build.builder import build_index
from core.eval.metrics import ndcg_at_k
from core.searcher import search_vault

ML = DATA_DIR / "multilingual"
LANGS = ("en", "de", "fr", "ja", "ko", "ru", "zh")
MODES = ("fts", "hybrid")
ENGLISH = {
    "scifact": (DATA_DIR / "scifact" / "vault", DATA_DIR / "scifact" / "dev_queries.jsonl", "dev_qrels.tsv"),
    "dendron": (DATA_DIR / "dendron" / "vault", DATA_DIR / "known-item" / "dendron_dev_queries.jsonl", ""),
    "powershell": (
        DATA_DIR / "powershell-docs" / "reference",
        DATA_DIR / "known-item" / "powershell_dev_queries.jsonl",
        "",
    ),
}
# Today's figures (main @ 2a0ba5a, issue 13): English nDCG@10 to hold within 0.005.
ENGLISH_TODAY = {
    "fts": {"scifact": 0.7023, "dendron": 0.9367, "powershell": 0.9124},
    "hybrid": {"scifact": 0.7079, "dendron": 0.9407, "powershell": 0.9291},
}
TYPO_SEED = 13
PREFIX_SEED = 13


def _qrels_path(queries: Path) -> Path:
    return queries.with_name(queries.name.replace("_queries.jsonl", "_qrels.tsv"))


def _english(name: str) -> tuple[Path, dict[str, str], dict[str, dict[str, int]]]:
    vault, queries, qrels = ENGLISH[name]
    qp = queries.with_name(qrels) if qrels else _qrels_path(queries)
    return vault, load_queries(queries), load_qrels(qp)


def _index(vault: Path, work: Path, name: str) -> Path:
    index_dir = work / name
    build_index(vault, index_dir=index_dir)
    return index_dir


def _ids(vault: Path, index_dir: Path) -> dict[str, str]:
    """rel_path -> the corpus id the qrels use (the path, or the frontmatter id where set)."""
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault.resolve(), index_dir)))
    try:
        return {rel: (fid or rel) for rel, fid in conn.execute("SELECT rel_path, frontmatter_id FROM notes")}
    finally:
        conn.close()


def _run(
    vault: Path,
    index_dir: Path,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    mode: str,
    ids: dict[str, str],
) -> dict[str, Any]:
    scores, nohit, times, cpu = [], 0, [], []
    for qid, text in queries.items():
        if qid not in qrels:
            continue
        t, c = time.perf_counter(), time.process_time()
        res = search_vault(vault, text, mode=mode, limit=10, index_dir=index_dir)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        rel = qrels[qid]
        ranked = [r.rel_path if r.rel_path in rel else ids.get(r.rel_path, r.rel_path) for r in res]
        scores.append(ndcg_at_k(ranked, rel, 10) if ranked else 0.0)
        nohit += not ranked
    n = len(scores)
    return {
        "n": n,
        "ndcg10": sum(scores) / max(n, 1),
        "nohit": nohit / max(n, 1),
        "p50_ms": statistics.median(times) * 1000 if times else None,
        "cpu_p50_ms": statistics.median(cpu) * 1000 if cpu else None,  # CPU time: less load-sensitive than wall clock
        "per_query": scores,
    }


def _ml_qrels(lang: str, qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {q: {k.removeprefix(f"{lang}/"): v for k, v in rel.items()} for q, rel in qrels.items()}


def multilingual(work: Path) -> dict[str, Any]:
    base = json.loads((ML / "baselines_dev.json").read_text())["A"]
    out: dict[str, Any] = {}
    for lang in LANGS:
        vault = ML / "vault" / lang
        t = time.perf_counter()
        index_dir = _index(vault, work, f"ml_{lang}")
        build_s = time.perf_counter() - t
        ids = {rel: rel for rel in _ids(vault, index_dir)}
        sets: dict[str, Any] = {}
        for qfile in sorted((ML / "queries").glob(f"{lang}_*_dev_queries.jsonl")):
            kind = qfile.name.split("_")[1]
            queries, qrels = load_queries(qfile), _ml_qrels(lang, load_qrels(_qrels_path(qfile)))
            row: dict[str, Any] = {"baselines": {k: v for k, v in base[lang][kind].items() if isinstance(v, dict)}}
            for mode in MODES:
                r = _run(vault, index_dir, queries, qrels, mode, ids)
                r.pop("per_query")
                row[mode] = r
            sets[kind] = row
            print(lang, kind, {m: round(row[m]["ndcg10"], 4) for m in MODES}, flush=True)
        out[lang] = {"build_seconds": build_s, "sets": sets}
    return out


def english(work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ENGLISH:
        vault, queries, qrels = _english(name)
        index_dir = _index(vault, work, f"en_{name}")
        ids = _ids(vault, index_dir)
        out[name] = {}
        for mode in MODES:
            r = _run(vault, index_dir, queries, qrels, mode, ids)
            r.pop("per_query")
            r["today"] = ENGLISH_TODAY[mode][name]
            out[name][mode] = r
        print(name, {m: round(out[name][m]["ndcg10"], 4) for m in MODES}, flush=True)
    return out


_LETTERS = re.compile(r"[^\W\d_]{5,}")


def typo_queries(queries: dict[str, str], seed: int = TYPO_SEED) -> dict[str, str]:
    """One edit (insert, delete, swap, substitute) in one word of >= 5 letters of each query."""
    rng = random.Random(seed)
    out = {}
    for qid, text in sorted(queries.items()):
        words = list(_LETTERS.finditer(text))
        if not words:
            continue
        m = rng.choice(words)
        w = m.group()
        i = rng.randrange(1, len(w) - 1)
        op = rng.choice(("insert", "delete", "swap", "substitute"))
        c = rng.choice("abcdefghijklmnopqrstuvwxyz")
        if op == "insert":
            w2 = w[:i] + c + w[i:]
        elif op == "delete":
            w2 = w[:i] + w[i + 1 :]
        elif op == "swap":
            w2 = w[:i] + w[i + 1] + w[i] + w[i + 2 :] if w[i] != w[i + 1] else w[:i] + w[i + 1 :]
        else:
            w2 = w[:i] + (c if c != w[i].lower() else "x") + w[i + 1 :]
        out[qid] = text[: m.start()] + w2 + text[m.end() :]
    return out


def typo(work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("dendron", "powershell"):
        vault, queries, qrels = _english(name)
        index_dir = work / f"en_{name}"
        build_index(vault, index_dir=index_dir)
        ids = _ids(vault, index_dir)
        edited = typo_queries(queries)
        plain = {q: queries[q] for q in edited}
        a = _run(vault, index_dir, plain, qrels, "fts", ids)
        b = _run(vault, index_dir, edited, qrels, "fts", ids)
        out[name] = {
            "n": b["n"],
            "unedited_ndcg10": a["ndcg10"],
            "typo_ndcg10": b["ndcg10"],
            "ratio": b["ndcg10"] / a["ndcg10"] if a["ndcg10"] else None,
            "examples": [edited[q] for q in sorted(edited)[:5]],
        }
        print("typo", name, round(out[name]["ratio"], 4), flush=True)
    return out


def _note_words(vault: Path, index_dir: Path) -> dict[str, set[str]]:
    """word -> the notes (rel paths) whose text holds it (lower-cased letter runs of >= 3)."""
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault.resolve(), index_dir)))
    try:
        rows = conn.execute(
            "SELECT n.rel_path, f.title, f.headings, f.body FROM notes_fts f JOIN notes n ON n.id = f.rowid"
        ).fetchall()
    finally:
        conn.close()
    words: dict[str, set[str]] = {}
    for rel, *texts in rows:
        for w in set(re.findall(r"[^\W\d_]{3,}", " ".join(t or "" for t in texts).lower())):
            words.setdefault(w, set()).add(rel)
    return words


def prefix_queries(
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    words: dict[str, set[str]],
    ids: dict[str, str],
    seed: int = PREFIX_SEED,
) -> dict[str, tuple[str, str]]:
    """qid -> (the query with its rarest word of >= 6 letters cut to its first 3-5 letters, the query
    without that word): the second is the control, what the other words find on their own."""
    rng = random.Random(seed)
    by_id = {**{v: k for k, v in ids.items()}, **{k: k for k in ids}}
    out = {}
    for qid, text in sorted(queries.items()):
        target = by_id.get(next(iter(qrels.get(qid, {})), ""), None)
        found = [m for m in re.finditer(r"[^\W\d_]{6,}", text) if target in words.get(m.group().lower(), ())]
        if not found:
            continue
        m = min(found, key=lambda x: (len(words[x.group().lower()]), -len(x.group()), x.start()))
        cut = m.group()[: rng.choice((3, 4, 5))]
        out[qid] = (text[: m.start()] + cut + text[m.end() :], " ".join((text[: m.start()] + text[m.end() :]).split()))
    return out


def _top10(vault: Path, index_dir: Path, text: str, rel: dict[str, int], ids: dict[str, str]) -> bool:
    if not text.strip():
        return False
    res = search_vault(vault, text, mode="fts", limit=10, index_dir=index_dir)
    return any(r.rel_path in rel or ids.get(r.rel_path) in rel for r in res)


def prefix(work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("dendron", "powershell"):
        vault, queries, qrels = _english(name)
        index_dir = work / f"en_{name}"
        build_index(vault, index_dir=index_dir)
        ids = _ids(vault, index_dir)
        pq = prefix_queries(queries, qrels, _note_words(vault, index_dir), ids)
        hits = sum(_top10(vault, index_dir, cut, qrels[q], ids) for q, (cut, _) in pq.items())
        control = sum(_top10(vault, index_dir, rest, qrels[q], ids) for q, (_, rest) in pq.items())
        n = max(len(pq), 1)
        out[name] = {
            "n": len(pq),
            "top10_share": hits / n,
            "without_the_word_top10_share": control / n,
            "examples": [c for c, _ in list(pq.values())[:8]],
        }
        print("prefix", name, out[name]["n"], round(hits / n, 3), "control", round(control / n, 3), flush=True)
    return out


def build(work: Path) -> dict[str, Any]:
    vault = ENGLISH["scifact"][0]
    runs = []
    for i in range(2):
        index_dir = work / f"build_{i}"
        t = time.perf_counter()
        report = build_index(vault, index_dir=index_dir)
        runs.append(time.perf_counter() - t)
        resolved = gen.resolve(gen.layout_for(vault.resolve(), index_dir))
        size = sum(part.size for part in resolved.parts)  # the segments a reader opens
    return {"cold_seconds": min(runs), "runs": runs, "generation_bytes": size, "notes": report.notes}


# A SciFact cold build in a subprocess whose working directory holds the code tree to time: wall
# clock with the default workers, then CPU time (time.process_time) of a second build with workers=1,
# where all the work is in the process (wall clock of the same code swings with the machine's load).
_BUILD_SCRIPT = """
import json, sys, time
from pathlib import Path
from core import generations as gen
from core.build.builder import build_index
vault, work = Path(sys.argv[1]), Path(sys.argv[2])
t = time.perf_counter()
report = build_index(vault, index_dir=work / "wall")
wall = time.perf_counter() - t
size = sum(p.size for p in gen.resolve(gen.layout_for(vault.resolve(), work / "wall")).parts)
t = time.process_time()
build_index(vault, index_dir=work / "cpu", workers=1)
print(json.dumps({"wall": wall, "cpu": time.process_time() - t, "bytes": size, "notes": report.notes}))
"""


def build_vs(work: Path, codes: dict[str, Path], rounds: int) -> dict[str, dict[str, Any]]:
    """SciFact cold build of this tree ("now") and of the first ``--code`` tree ("before"), alternated
    for ``rounds`` rounds, each build in a fresh index dir: the ``build`` and ``build_today`` results."""
    if not codes:
        raise SystemExit("build_vs needs a --code tree to compare with")
    name, before = next(iter(codes.items()))
    vault = ENGLISH["scifact"][0]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    got: dict[str, list[dict[str, Any]]] = {"before": [], "now": []}
    loads = [os.getloadavg()[0]]
    for i in range(rounds):
        for key, tree in (("before", before), ("now", Path(__file__).resolve().parents[1])):
            out = work / f"build_vs_{key}_{i}"
            done = subprocess.run(
                [sys.executable, "-c", _BUILD_SCRIPT, str(vault), str(out)],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            got[key].append(json.loads(done.stdout.strip().splitlines()[-1]))
            loads.append(os.getloadavg()[0])
        print("build", {k: v[-1] for k, v in got.items()}, flush=True)
    how = (
        f"{rounds} interleaved rounds ({name}, now), a fresh index dir each, in subprocesses; wall clock with"
        f" the default workers, CPU time of a second build with workers=1; 1-minute load {min(loads):.1f}-{max(loads):.1f}"
    )

    def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "cold_seconds": round(min(r["wall"] for r in runs), 3),
            "runs": [round(r["wall"], 3) for r in runs],
            "generation_bytes": runs[-1]["bytes"],
            "notes": runs[-1]["notes"],
        }

    now = {
        **summary(got["now"]),
        "interleaved_ratios": [round(n["wall"] / b["wall"], 3) for n, b in zip(got["now"], got["before"])],
        "cpu_seconds_in_process": {k: [round(r["cpu"], 3) for r in v] for k, v in got.items()},
        "note": how,
    }
    return {"build": now, "build_today": {**summary(got["before"]), "source": f"{name} ({before}), the same run"}}


# Run in a subprocess whose working directory holds the code tree to time (its ``core`` comes first
# on sys.path); only the standard library and ``core`` are imported, so any tree of the project works.
_LATENCY_SCRIPT = """
import json, statistics, sys, time
from pathlib import Path
from core.build.builder import build_index
from core.searcher import search_vault
vault, queries, index_dir = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
if not index_dir.exists():
    build_index(vault, index_dir=index_dir)
qs = [json.loads(line)["text"] for line in queries.read_text().splitlines() if line.strip()]
for q in qs[:30]:
    search_vault(vault, q, mode="fts", limit=10, index_dir=index_dir)
times = []
for q in qs * 2:
    t = time.process_time()
    search_vault(vault, q, mode="fts", limit=10, index_dir=index_dir)
    times.append(time.process_time() - t)
print(json.dumps({"p50_ms": statistics.median(times) * 1000}))
"""


def latency(work: Path, codes: dict[str, Path], rounds: int) -> dict[str, Any]:
    """SciFact fts CPU p50 of each code tree ("now" = this one), the trees alternated per round."""
    vault, queries, _ = ENGLISH["scifact"]
    trees = {**codes, "now": Path(__file__).resolve().parents[1]}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    out: dict[str, list[float]] = {name: [] for name in trees}
    loads = [os.getloadavg()[0]]
    for _ in range(rounds):
        for name, tree in trees.items():
            args = [sys.executable, "-c", _LATENCY_SCRIPT, str(vault), str(queries), str(work / f"latency_{name}")]
            done = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, check=True)
            out[name].append(round(json.loads(done.stdout.strip().splitlines()[-1])["p50_ms"], 3))
            loads.append(os.getloadavg()[0])
        print("latency", {k: v[-1] for k, v in out.items()}, flush=True)
    return {
        "how": (
            "CPU time (time.process_time) per warm search_vault(limit=10, passages on) over 150 SciFact dev"
            f" queries x2, code trees {', '.join(trees)} alternated {rounds} times, each in its own process"
            f" on an index it built; 1-minute load average {min(loads):.1f}-{max(loads):.1f}"
        ),
        "scifact_fts_p50_ms": out,
    }


# Instructions counted by callgrind (valgrind): the same count for the same code and input whatever
# the machine's load, where CPU time here swings by half between rounds of the same code. The script
# runs the work (``search``: 150 SciFact dev queries after 30 warm-ups; ``build``: a cold build with
# workers=1) or, with ``skip``, everything but the work: the difference is the work's count.
_COUNT_SCRIPT = """
import json, sys
from pathlib import Path
from core.build.builder import build_index
from core.searcher import search_vault
what, vault, queries, index_dir, skip = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5] == "skip"
kw = {}
try:  # one stat walk (in the warm-up), then reused: no path that depends on the clock
    from core.index.freshness import FreshnessOptions
    kw = {"freshness": FreshnessOptions(window_seconds=1e9)}
except ImportError:  # a tree from before freshness checks
    pass
if what == "build_without_arrays":  # the build minus the arrays it stores for readers (issue 14)
    import core.build.builder as builder
    for name in ("compute_sparse", "store_sparse", "compute_chunk_vectors", "store_chunk_vectors"):
        getattr(builder, name)  # AttributeError: the build no longer calls it, and the count would not say so
    builder.compute_sparse = lambda conn: None
    builder.store_sparse = builder.store_chunk_vectors = lambda conn, arrays: None
    builder.compute_chunk_vectors = lambda conn, sparse: None
if what.startswith("build"):
    if not skip:
        build_index(vault, index_dir=index_dir, workers=1)
else:
    qs = [json.loads(line)["text"] for line in queries.read_text().splitlines() if line.strip()]
    for q in qs[:30]:
        search_vault(vault, q, mode="fts", limit=10, index_dir=index_dir, **kw)
    for q in ([] if skip else qs[:150]):
        search_vault(vault, q, mode="fts", limit=10, index_dir=index_dir, **kw)
"""
COUNTED_QUERIES = 150


def _instructions(tree: Path, what: str, index_dir: Path, env: dict[str, str]) -> int:
    """Instructions of ``what`` in ``tree``: the run with the work minus the run without (in parallel)."""
    vault, queries, _ = ENGLISH["scifact"]
    runs = []
    for skip in ("work", "skip"):
        out = index_dir.parent / f"{index_dir.name}.{what}.{skip}.callgrind"
        args = [str(a) for a in (sys.executable, "-c", _COUNT_SCRIPT, what, vault, queries, index_dir, skip)]
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *args]
        runs.append((out, subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
    counts = []
    for out, proc in runs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"callgrind run in {tree} failed: {err.decode(errors='replace')[-2000:]}")
        summary = next(line for line in out.read_text().splitlines() if line.startswith("summary:"))
        counts.append(int(summary.split()[1]))
        out.unlink()
    return counts[0] - counts[1]


def _remove(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


def instructions(work: Path, codes: dict[str, Path]) -> dict[str, Any]:
    """Instructions per warm SciFact fts query and per SciFact cold build (workers=1), per code tree."""
    vault, queries, _ = ENGLISH["scifact"]
    trees = {**codes, "now": Path(__file__).resolve().parents[1]}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    per_query, build, without = {}, {}, {}
    for name, tree in trees.items():
        index_dir = work / f"count_{name}"
        _remove(index_dir)
        subprocess.run(  # the index the queries run on, built outside valgrind
            [sys.executable, "-c", _COUNT_SCRIPT, "build", str(vault), str(queries), str(index_dir), "work"],
            cwd=tree,
            env=env,
            check=True,
        )
        per_query[name] = _instructions(tree, "search", index_dir, env) // COUNTED_QUERIES
        _remove(work / f"count_build_{name}")
        build[name] = _instructions(tree, "build", work / f"count_build_{name}", env)
        _remove(work / f"count_build_{name}")
        if "store_sparse" in (tree / "core" / "index" / "builder.py").read_text():
            without[name] = _instructions(tree, "build_without_arrays", work / f"count_build_{name}", env)
            _remove(work / f"count_build_{name}")
        print("instructions", name, per_query[name], build[name], without.get(name), flush=True)
    return {
        "how": (
            f"valgrind --tool=callgrind: a process running the work minus one running all but it; search: "
            f"{COUNTED_QUERIES} SciFact dev fts queries (limit=10, passages on) after 30 warm-ups, per query;"
            f" build: a SciFact cold build with workers=1; code trees {', '.join(trees)} (a tree from before"
            " freshness checks searches without them)"
        ),
        "scifact_fts_per_query": per_query,
        "scifact_cold_build": build,
        # the same build with the term-major arrays, vocabulary and filter mask it stores for readers
        # (issue 14; a tree without them builds none) replaced by nothing: readers then compute them
        "scifact_cold_build_without_stored_arrays": without,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--only", default="multilingual,english,typo,prefix,build")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "lang.json")
    ap.add_argument("--code", action="append", default=[], help="name=DIR: another code tree for the latency stage")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpora", default="", help="sets stage: only these corpora (mdn-en, dendron, scifact, ...)")
    args = ap.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench_lang_"))
    work.mkdir(parents=True, exist_ok=True)
    stages = args.only.split(",")
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    when = {"machine": machine_info(), "loadavg": os.getloadavg(), "date": time.time()}
    # the sets stage measures quality only: the load and date the page gives the timings stay theirs
    result: dict[str, Any] = {**old, **({} if old and set(stages) <= {"sets"} else when)}
    codes = {name: Path(tree) for name, _, tree in (c.partition("=") for c in args.code)}
    for stage in stages:
        if stage == "latency":
            result["latency_cpu_interleaved"] = latency(work, codes, args.rounds)
        elif stage == "instructions":
            result["instructions"] = instructions(work, codes)
        elif stage == "sets":  # issue 26: every query set, code trees beside trigram and bm25s
            from bench.bench_sets import run_sets

            only = set(filter(None, args.corpora.split(",")))
            result["sets"] = {**((result.get("sets") or {}) if only else {}), **run_sets(work, codes, only or None)}
            result["sets_codes"] = {name: str(tree) for name, tree in codes.items()}
            result["sets_run"] = {"date": when["date"], "loadavg": when["loadavg"]}
        elif stage == "build_vs":
            result.update(build_vs(work, codes, args.rounds))
        else:
            result[stage] = globals()[stage](work)
    write_json(args.out, result)


if __name__ == "__main__":
    main()
