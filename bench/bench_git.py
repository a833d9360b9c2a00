"""``--source git`` on a git copy of the PowerShell docs with a synthetic 1,000-commit history.

    python -m bench.bench_git [--commits 1000] [--out bench/results/git.json]

1. The repository: every note of the PowerShell reference in a first commit, then ``commits - 1``
   commits that each append a line to 1-8 random notes (fixed seed, one day apart), all written
   by one ``git fast-import`` stream; the working tree is checked out at HEAD.
2. Git access (the choice of ``core/vault/gitsource.py``), each way timed on the same repository:
   the ``git`` executable (``ls-tree`` + one ``cat-file --batch``; one ``log --name-status`` pass;
   ``rev-parse``), dulwich and pygit2 (where installed: they are not dependencies), for
   listing + reading every note blob, the dates pass over the whole history, and resolving HEAD.
3. Builds, each in its own process: cold from the working tree and from git (best of 2, interleaved), the up-to-date
   check (``watermark_current``, in process, median of 20), the ``git_date`` pass alone
   (``gitsource.history``, median of 5), and an incremental build after a commit that touches
   5% of the notes, against the cold git build.
4. Age decay: ``fts`` latency and top-10 movement with ``decay`` off, default and on every note.

Targets (issue #15): git cold <= 1.3x working-tree cold; up-to-date check <= 20 ms; dates pass
<= 1 s; incremental <= 25% of cold.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, RESULTS_DIR, emit_phase_result, machine_info, median_ms, run_phase, write_json

MODULE = "bench.bench_git"
SOURCE = DATA_DIR / "powershell-docs" / "reference"
CHANGE_FRACTION = 0.05
T0 = 1_600_000_000
COLD_REPEATS = 2  # best of, per source
TARGETS = {"cold_ratio": 1.3, "uptodate_ms": 20.0, "dates_pass_s": 1.0, "incremental_ratio": 0.25}


# ---------------------------------------------------------------- the repository


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


def make_repo(dest: Path, commits: int, seed: int = 15, source: Path = SOURCE) -> dict[str, Any]:
    """A git repository holding ``source``'s notes with ``commits`` commits of history (see the
    docstring). ``dates`` is what the history pass must find: rel_path -> (last, first) commit time."""
    notes = sorted(p.relative_to(source).as_posix() for p in source.rglob("*.md"))
    dates = {rel: (T0, T0) for rel in notes}
    rng = random.Random(seed)
    text = {rel: (source / rel).read_bytes() for rel in notes}
    stream = bytearray()

    def header(n: int) -> None:
        when = T0 + n * 86_400
        stream.extend(b"commit refs/heads/main\nmark :%d\n" % (n + 1))
        stream.extend(b"committer Bench <bench@example.org> %d +0000\n" % when)
        stream.extend(_data(b"commit %d" % n))
        if n:
            stream.extend(b"from :%d\n" % n)

    header(0)
    for rel in notes:
        stream.extend(b"M 100644 inline " + rel.encode() + b"\n" + _data(text[rel]))
    touched = 0
    for n in range(1, commits):
        header(n)
        for rel in rng.sample(notes, rng.randint(1, 8)):
            text[rel] += b"\nEdited in commit %d.\n" % n
            dates[rel] = (T0 + n * 86_400, T0)
            touched += 1
            stream.extend(b"M 100644 inline " + rel.encode() + b"\n" + _data(text[rel]))
    dest.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "fast-import", "--quiet"], input=bytes(stream), check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "-f", "main"], check=True)
    return {"notes": len(notes), "commits": commits, "note_edits": touched, "dates": dates}


def commit_change(repo: Path, fraction: float, seed: int = 16) -> int:
    """One commit appending a sentence to ``fraction`` of the notes; returns how many it touched."""
    notes = sorted(p for p in repo.rglob("*.md") if ".git" not in p.parts and ".vaultsearch" not in p.parts)
    chosen = random.Random(seed).sample(notes, max(1, round(len(notes) * fraction)))
    for path in chosen:
        with path.open("a", encoding="utf-8") as fh:
            fh.write("\nAn appended sentence for the incremental bench.\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    env = {"GIT_COMMITTER_DATE": "@2000000000 +0000", "GIT_AUTHOR_DATE": "@2000000000 +0000"}
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "bench change"],
        check=True,
        env={**__import__("os").environ, **env},
    )
    return len(chosen)


# ---------------------------------------------------------------- git access, three ways


def _best(fn: Callable[[], Any], repeats: int = 3) -> tuple[Any, float]:
    """(result, best seconds of ``repeats``): the least disturbed run on a shared machine."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def access_git(repo: Path) -> dict[str, Any]:
    from core.vault import gitsource as git

    r = git.discover(repo)

    def read_all() -> int:
        listing = git.list_tree(r, git.resolve(r, "HEAD").tree)
        return len(git.read_blobs(r, [e.blob for e in listing.entries]))

    head = git.resolve(r, "HEAD").commit
    n, read_s = _best(read_all)
    dates, dates_s = _best(lambda: git.history(r, head))
    _, head_s = _best(lambda: git.resolve_commit(r, "HEAD"), repeats=20)
    return {"blobs": n, "read_all_s": read_s, "dates_paths": len(dates), "dates_s": dates_s, "resolve_head_s": head_s}


def access_dulwich(repo: Path) -> dict[str, Any]:
    from dulwich.diff_tree import tree_changes
    from dulwich.objects import Blob, Tree
    from dulwich.repo import Repo

    r = Repo(str(repo))

    def read_all() -> int:
        store = r.object_store
        tree = store[r[r.head()].tree]
        assert isinstance(tree, Tree)
        count = 0
        for entry in store.iter_tree_contents(tree.id):
            if entry.path.endswith(b".md"):
                blob = store[entry.sha]
                assert isinstance(blob, Blob)
                count += len(blob.data) >= 0
        return count

    def dates() -> int:
        last: dict[bytes, int] = {}
        store = r.object_store
        for walk in r.get_walker():
            c = walk.commit
            parent_tree = store[c.parents[0]].tree if c.parents else None
            for change in tree_changes(store, parent_tree, c.tree):
                path = change.new.path or change.old.path
                last.setdefault(path, c.commit_time)
        return len(last)

    n, read_s = _best(read_all)
    paths, dates_s = _best(dates, repeats=1)
    _, head_s = _best(lambda: Repo(str(repo)).head(), repeats=20)
    return {"blobs": n, "read_all_s": read_s, "dates_paths": paths, "dates_s": dates_s, "resolve_head_s": head_s}


def access_pygit2(repo: Path) -> dict[str, Any]:
    import pygit2

    r = pygit2.Repository(str(repo))

    def read_all() -> int:
        count = 0
        stack = [r.revparse_single("HEAD").peel(pygit2.Commit).tree]
        while stack:
            for entry in stack.pop():
                if entry.type_str == "tree":
                    stack.append(entry)
                elif entry.name.endswith(".md"):
                    count += len(entry.data) >= 0
        return count

    def dates() -> int:
        last: dict[str, int] = {}
        for c in r.walk(r.head.target, pygit2.enums.SortMode.TIME):
            diff = c.tree.diff_to_tree(c.parents[0].tree, swap=True) if c.parents else c.tree.diff_to_tree(swap=True)
            for delta in diff.deltas:
                last.setdefault(delta.new_file.path, c.commit_time)
        return len(last)

    n, read_s = _best(read_all)
    paths, dates_s = _best(dates)
    _, head_s = _best(lambda: str(pygit2.Repository(str(repo)).head.target), repeats=20)
    return {"blobs": n, "read_all_s": read_s, "dates_paths": paths, "dates_s": dates_s, "resolve_head_s": head_s}


def measure_access(repo: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"git_executable": access_git(repo)}
    for name, fn in (("dulwich", access_dulwich), ("pygit2", access_pygit2)):
        try:
            out[name] = fn(repo)
        except ImportError as exc:  # optional for the bench, never a dependency
            out[name] = {"not_run": f"not installed: {exc.name}"}
    return out


# ---------------------------------------------------------------- build phases (each in its own process)


def _phase_build(repo: Path, index_dir: Path, source: str) -> dict[str, Any]:
    from core.build.builder import build_index

    t = time.perf_counter()
    report = build_index(repo, index_dir=index_dir, source=source)
    wall = time.perf_counter() - t
    d = report.to_dict()
    d["problems"] = len(d["problems"])
    return {"wall_seconds": wall, "report": d}


def _phase_uptodate(repo: Path, index_dir: Path) -> dict[str, Any]:
    from core.build.builder import build_index
    from core.index.gitstatus import watermark_current

    samples = []
    for _ in range(20):
        t = time.perf_counter()
        assert watermark_current(repo, index_dir) is True
        samples.append(time.perf_counter() - t)
    t = time.perf_counter()
    report = build_index(repo, index_dir=index_dir)
    return {
        "watermark_median_ms": median_ms(samples),
        "watermark_samples_ms": [round(s * 1000, 3) for s in samples],
        "build_uptodate_ms": (time.perf_counter() - t) * 1000,
        "build_published_nothing": report.up_to_date,
    }


def _phase_dates(repo: Path) -> dict[str, Any]:
    from core.vault import gitsource as git

    r = git.discover(repo)
    head = git.resolve(r, "HEAD").commit
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        found = git.history(r, head)
        samples.append(time.perf_counter() - t)
    return {"median_s": median_ms(samples) / 1000, "samples_s": samples, "paths": len(found)}


def _phase_decay(repo: Path, index_dir: Path, n_queries: int = 50) -> dict[str, Any]:
    """``fts`` with and without age decay on the git index: latency and how much the top 10 moves.
    The PowerShell notes set no ``volatility``, so the default decay must change nothing; the
    ``all_notes`` variant decays every note with a one-year half-life by its ``git_date``."""
    from core.modes.decay import AgeDecay
    from core.searcher import search_vault

    notes = sorted(p for p in repo.rglob("*.md") if ".git" not in p.parts)
    queries = []
    for path in random.Random(17).sample(notes, n_queries):
        lines = [ln.strip("# ").strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith("# ")]
        queries.append(lines[0] if lines else path.stem.replace("-", " "))
    variants = {"off": None, "default": AgeDecay(), "all_notes": AgeDecay(half_lives={"": 365.0})}
    out: dict[str, Any] = {"queries": len(queries)}
    tops: dict[str, list[list[str]]] = {}
    for name, decay in variants.items():
        search_vault(repo, queries[0], mode="fts", index_dir=index_dir, decay=decay)  # warm
        samples, tops[name] = [], []
        for q in queries:
            t = time.perf_counter()
            hits = search_vault(repo, q, mode="fts", index_dir=index_dir, decay=decay)
            samples.append(time.perf_counter() - t)
            tops[name].append([h.rel_path for h in hits])
        out[name] = {"p50_ms": median_ms(samples)}
    for name in ("default", "all_notes"):
        same = [a == b for a, b in zip(tops["off"], tops[name])]
        overlap = [len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(tops["off"], tops[name])]
        out[name].update(identical_top10=sum(same) / len(same), mean_overlap10=sum(overlap) / len(overlap))
    return out


def run(commits: int, out: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-git-") as tmp:
        repo = Path(tmp) / "ps-docs"
        t = time.perf_counter()
        made = make_repo(repo, commits)
        made.pop("dates")
        made["make_seconds"] = time.perf_counter() - t
        access = measure_access(repo)
        colds: dict[str, list[dict[str, Any]]] = {"worktree": [], "git": []}
        for i in range(COLD_REPEATS):  # interleaved, each into a new index dir: the load moves both alike
            for source in ("worktree", "git"):
                ix = Path(tmp) / f"ix-{source}-{i}"
                colds[source].append(run_phase(MODULE, ["_phase", "build", str(repo), str(ix), source]))
        work = min(colds["worktree"], key=lambda r: r["wall_seconds"])
        cold = min(colds["git"], key=lambda r: r["wall_seconds"])
        git_ix = Path(tmp) / f"ix-git-{colds['git'].index(cold)}"
        samples = {k: [round(r["wall_seconds"], 3) for r in v] for k, v in colds.items()}
        uptodate = run_phase(MODULE, ["_phase", "uptodate", str(repo), str(git_ix)])
        dates = run_phase(MODULE, ["_phase", "dates", str(repo)])
        touched = commit_change(repo, CHANGE_FRACTION)
        incremental = run_phase(MODULE, ["_phase", "build", str(repo), str(git_ix), "git"])
        decay = run_phase(MODULE, ["_phase", "decay", str(repo), str(git_ix)])
        shutil.rmtree(repo, ignore_errors=True)
    result = {
        "machine": machine_info(),
        "repository": made,
        "access": access,
        "cold_worktree": work,
        "cold_git": cold,
        "cold_samples_s": samples,
        "uptodate": uptodate,
        "dates_pass": dates,
        "incremental": {**incremental, "touched_notes": touched},
        "decay": decay,
        "ratios": {
            "cold_ratio": cold["wall_seconds"] / work["wall_seconds"],
            "incremental_ratio": incremental["wall_seconds"] / cold["wall_seconds"],
        },
        "targets": TARGETS,
    }
    write_json(out, result)
    return result


def render_markdown(data: dict[str, Any]) -> list[str]:
    """The git section of docs/benchmarks.md."""
    a, r = data["access"], data["ratios"]

    def cell(d: dict[str, Any], key: str, scale: float = 1.0) -> str:
        return "-" if key not in d else f"{d[key] * scale:.3f}"

    rows = [
        f"| {name} | {cell(d, 'read_all_s')} | {cell(d, 'dates_s')} | {cell(d, 'resolve_head_s', 1000)} | "
        f"{d.get('not_run', '')} |"
        for name, d in a.items()
    ]
    verdict = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
    up = data["uptodate"]["watermark_median_ms"]
    targets = [
        ("cold build, git vs working tree", f"{r['cold_ratio']:.2f}x", "<= 1.3x", r["cold_ratio"] <= 1.3),
        ("up-to-date check (watermark)", f"{up:.1f} ms", "<= 20 ms", up <= 20),
        ("git_date pass", f"{data['dates_pass']['median_s']:.3f} s", "<= 1 s", data["dates_pass"]["median_s"] <= 1),
        ("incremental after a 5% commit", f"{r['incremental_ratio']:.2f} of cold", "<= 0.25",
         r["incremental_ratio"] <= 0.25),
    ]  # fmt: skip
    rep = data["repository"]
    return [
        f"A git copy of the PowerShell docs ({rep['notes']} notes) with {rep['commits']} commits "
        f"({rep['note_edits']} note edits), made by `bench/bench_git.py` with one `git fast-import`.",
        "",
        "| target | measured | target | |",
        "|---|---|---|---|",
        *[f"| {name} | {value} | {goal} | {verdict(ok)} |" for name, value, goal, ok in targets],
        "",
        f"Cold builds (best of {len(data.get('cold_samples_s', {}).get('git', [1]))}): working tree "
        f"{data['cold_worktree']['wall_seconds']:.2f} s, git {data['cold_git']['wall_seconds']:.2f} s; incremental "
        f"{data['incremental']['wall_seconds']:.2f} s ({data['incremental']['touched_notes']} notes changed). "
        "Timed on a shared machine (see the load average): single runs vary by a factor of two.",
        "",
        "Git access, best of 3 (seconds; HEAD in ms): list + read every note blob, the dates pass over the "
        "whole history, resolving HEAD.",
        "",
        "| access | read all | dates pass | resolve HEAD (ms) | |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"The up-to-date `build_index` call (verifies the active generation's SHA-256 first, in a new process): "
        f"{data['uptodate'].get('build_uptodate_ms', 0):.0f} ms.",
        "",
        *_decay_lines(data.get("decay")),
    ]


def _decay_lines(decay: dict[str, Any] | None) -> list[str]:
    if not decay:
        return ["_age decay: not measured_", ""]
    rows = [
        f"| {name} | {decay[name]['p50_ms']:.1f} | {_pct(decay[name].get('identical_top10'))} | "
        f"{_pct(decay[name].get('mean_overlap10'))} |"
        for name in ("off", "default", "all_notes")
    ]
    return [
        f"Age decay (`fts`, {decay['queries']} title queries on the git index; the notes set no `volatility`, so "
        "the default decay must leave every ranking as it is; `all_notes` decays every note by `git_date` with "
        "a one-year half-life):",
        "",
        "| decay | p50 ms | top 10 identical to off | mean overlap@10 |",
        "|---|---|---|---|",
        *rows,
        "",
    ]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_phase":
        kind, rest = argv[1], argv[2:]
        if kind == "build":
            emit_phase_result(_phase_build(Path(rest[0]), Path(rest[1]), rest[2]))
        elif kind == "uptodate":
            emit_phase_result(_phase_uptodate(Path(rest[0]), Path(rest[1])))
        elif kind == "dates":
            emit_phase_result(_phase_dates(Path(rest[0])))
        elif kind == "decay":
            emit_phase_result(_phase_decay(Path(rest[0]), Path(rest[1])))
        return
    parser = argparse.ArgumentParser(description="Benchmark --source git on the PowerShell docs.")
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "git.json")
    args = parser.parse_args(argv)
    result = run(args.commits, args.out)
    print("\n".join(render_markdown(result)))


if __name__ == "__main__":
    main()
