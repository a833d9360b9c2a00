"""Link-phase benchmark (issue 29: links resolve incrementally): one added note, one renamed note.

Per corpus (a fresh copy in a temporary folder, the index beside it): a cold ``vaultsearch index``, then
``EDITS`` rounds of (add one note that links to three notes, one of them missing; rename one note), each
followed by ``vaultsearch index --json`` as a whole new process (wall time around the subprocess,
interpreter start-up included). The link phase is timed inside that process by wrapping
``core.build.builder.recompute_edges``, which every version of the builder calls, so that ``--code`` can
point at another checkout (``git archive main | tar -x -C DIR``; its ``.venv`` is used) and measure the
code before the change the same way. Files are aged a day before each edit, so that the builder's racy
window does not decide what it re-reads.

    python -m bench.bench_links [--corpus synth10k|powershell|all] [--code DIR] [--out PATH]

``synth10k`` is ``bench.synth``'s 10,000-note vault (seed 0), generated into the temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, REPO_ROOT, RESULTS_DIR, copy_vault, machine_info, write_json

EDITS = 3
# ``vaultsearch index`` as one process, writing the seconds spent in each recompute_edges call to argv[1]
_CHILD = (
    "import atexit, json, sys, time\n"
    "import core.build.builder as builder\n"
    "spent, inner = [], builder.recompute_edges\n"
    "def timed(*args, **kwargs):\n"
    "    started = time.perf_counter()\n"
    "    try:\n"
    "        return inner(*args, **kwargs)\n"
    "    finally:\n"
    "        spent.append(time.perf_counter() - started)\n"
    "builder.recompute_edges = timed\n"
    "atexit.register(lambda: open(sys.argv[1], 'w').write(json.dumps(spent)))\n"
    "from core.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def _age(vault: Path) -> None:
    when = time.time() - 86400
    for path in vault.rglob("*.md"):
        os.utime(path, (when, when))


def _index(code: Path, vault: Path, index_dir: Path, label: str) -> dict[str, Any]:
    spent = index_dir.parent / "links.json"
    python = code / ".venv" / "bin" / "python"
    args = [str(python), "-c", _CHILD, str(spent), "index", "--json", "--index-dir", str(index_dir), str(vault)]
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(code)}
    # run in the checkout: ``-c`` puts the working directory first on sys.path, ahead of PYTHONPATH
    done = subprocess.run(args, env=env, cwd=code, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{label}: vaultsearch index failed: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    row = {
        "label": label,
        "index_s": round(wall, 3),
        "links_s": round(sum(json.loads(spent.read_text())), 4),
        "report_timings": report.get("timings"),
        "links": report.get("links"),
        "unresolved_links": report.get("unresolved_links"),
    }
    print(json.dumps(row), flush=True)
    return row


def run_corpus(code: Path, vault: Path, work: Path) -> dict[str, Any]:
    """The cold build, then ``EDITS`` added and renamed notes, each indexed by a new process."""
    index_dir = work / "index"
    rows: dict[str, list[dict[str, Any]]] = {"cold": [_index(code, vault, index_dir, "cold")], "add": [], "rename": []}
    notes = sorted(vault.rglob("*.md"))
    for i in range(EDITS):
        _age(vault)
        linked = (notes[i * 7].stem, notes[i * 7 + 3].stem)
        (vault / f"added-note-{i}.md").write_text(
            f"---\ntitle: Added note {i}\naliases: [added alias {i}]\n---\n# Added {i}\n\n"
            f"Links to [[{linked[0]}]], [[{linked[1]}]] and [[missing-{i}]].\n",
            encoding="utf-8",
        )
        rows["add"].append(_index(code, vault, index_dir, f"add {i}"))
        _age(vault)
        victim = notes[len(notes) // 2 + i * 11]
        victim.rename(victim.with_name(f"{victim.stem}-renamed{i}.md"))
        rows["rename"].append(_index(code, vault, index_dir, f"rename {i}"))
    medians = {
        kind: {key: statistics.median(r[key] for r in rows[kind]) for key in ("index_s", "links_s")}
        for kind in ("add", "rename")
    }
    return {"notes": len(notes), "runs": rows, "median": medians}


def _vault(corpus: str, tmp: Path) -> Path:
    if corpus == "powershell":
        return copy_vault(DATA_DIR / "powershell-docs" / "reference", tmp / "vault")
    subprocess.run([sys.executable, "-m", "bench.synth", str(tmp / "vault"), "10000"], check=True, cwd=REPO_ROOT)
    return tmp / "vault"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("synth10k", "powershell", "all"), default="all")
    parser.add_argument("--code", type=Path, default=REPO_ROOT, help="the checkout to measure (its .venv)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "links.json")
    args = parser.parse_args(argv)
    corpora = ("synth10k", "powershell") if args.corpus == "all" else (args.corpus,)
    results: dict[str, Any] = {"machine": machine_info(), "code": str(args.code.resolve()), "corpora": {}}
    for corpus in corpora:
        with tempfile.TemporaryDirectory(prefix=f"links-{corpus}-") as tmp:
            results["corpora"][corpus] = run_corpus(args.code.resolve(), _vault(corpus, Path(tmp)), Path(tmp))
        print(json.dumps({corpus: results["corpora"][corpus]["median"]}), flush=True)
    write_json(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
