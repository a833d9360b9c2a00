"""Issue 11 suites that stay (``@pytest.mark.slow``, each bounded to a minute or two):

- random SIGKILLs of builders, embedders and readers, many iterations: after every kill the
  index verifies, exactly one generation serves, and the next build/search works;
- a soak: reader processes in fts / vector / hybrid / graph_assisted search while a writer
  publishes >= 30 generations: zero failed searches, and every response comes from one
  generation that was really published (never a mixed or a never-active one).

Run with ``pytest -m slow tests/index/test_kills_and_soak.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_files

from core import generations as gen
from core.build.builder import build_index
from core.searcher import search_vault
from tests.minilm_fixture import FP32, cached_model_dirs, fixture_root

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
MODES = ("fts", "vector", "hybrid", "graph_assisted")


def notes(n: int, version: int) -> dict[str, str]:
    out = {f"n{i:03d}.md": f"# Note {i}\n\nquasar body {i} [[n{(i + 1) % n:03d}]]\n" for i in range(n)}
    out["marker.md"] = f"# Marker\n\nmarkerword generation{version:04d}\n"
    return out


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


BUILDER = """
import sys
from pathlib import Path
from core.build.builder import build_index
build_index(Path(sys.argv[1]), wait_seconds=30, workers=int(sys.argv[2]))
"""
EMBEDDER = """
import sys
from pathlib import Path
from core.build.embed import embed_index
embed_index(Path(sys.argv[1]), model=sys.argv[2], wait_seconds=30, publish_every=8)
"""
READER = """
import json, sys, time
from pathlib import Path
from core.errors import VaultSearchError
from core.searcher import search_vault
vault, modes, seconds, out = Path(sys.argv[1]), sys.argv[2].split(","), float(sys.argv[3]), sys.argv[4]
ok = failed = 0
seen, errors, mixed = {}, [], 0
end = time.monotonic() + seconds
i = 0
while time.monotonic() < end:
    mode = modes[i % len(modes)]
    i += 1
    try:
        results = search_vault(vault, "markerword quasar", mode=mode, limit=20)
    except VaultSearchError as exc:
        failed += 1
        errors.append(exc.reason)
        continue
    ok += 1
    gids = {r.index_generation_id for r in results}
    if len(gids) != 1:
        mixed += 1
        continue
    gid = gids.pop()
    marker = [r for r in results if r.rel_path == "marker.md"]
    if marker:
        seen.setdefault(gid, set()).add(marker[0].matched_text.split("generation")[-1][:4])
with open(out, "w") as f:
    json.dump({"ok": ok, "failed": failed, "errors": errors[:10], "mixed": mixed,
               "seen": {k: sorted(v) for k, v in seen.items()}}, f)
"""


def check_serving(vault: Path) -> str:
    gen.clear_verify_cache()
    layout = gen.layout_for(vault)
    checked = gen.verify_full(layout)
    assert sum(row["active"] for row in gen.list_generations(layout)) == 1
    assert len(search_vault(vault, "quasar", mode="fts")) > 0
    return checked["generation_id"]


def test_random_sigkills_of_builders_embedders_and_readers(
    tmp_path: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    model = str(cached_model_dirs(fixture_root(request, tmp_path_factory))[FP32])
    vault = write_files(tmp_path / "vault", notes(40, 0))
    build_index(vault)
    rng = random.Random(11)
    kills = {"builder": 0, "embedder": 0, "reader": 0}
    deadline = time.monotonic() + 90
    iteration = 0
    while time.monotonic() < deadline and iteration < 40:
        iteration += 1
        write_files(vault, {f"n{rng.randrange(40):03d}.md": f"# Edited\n\nquasar edit {iteration}\n"})
        victim = rng.choice(list(kills))
        if victim == "builder":
            proc = spawn(BUILDER, str(vault), str(rng.choice([1, 2])))
        elif victim == "embedder":
            proc = spawn(EMBEDDER, str(vault), model)
        else:
            proc = spawn(READER, str(vault), ",".join(MODES), "5", str(tmp_path / "r.json"))
        time.sleep(rng.uniform(0.05, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        kills[victim] += proc.returncode == -signal.SIGKILL
        check_serving(vault)
    build_index(vault, wait_seconds=30)  # a clean build after all that reaps every leftover
    check_serving(vault)
    assert os.listdir(gen.layout_for(vault).staging_dir) == []
    assert sum(kills.values()) >= 10, kills
    print(f"kills survived: {kills} in {iteration} iterations")


def test_soak_readers_in_every_lexical_mode_while_a_writer_publishes(tmp_path: Path) -> None:
    vault = write_files(tmp_path / "vault", notes(60, 0))
    published = {build_index(vault).generation_id: "0000"}
    readers = [
        spawn(READER, str(vault), ",".join(MODES[i:] + MODES[:i]), "60", str(tmp_path / f"reader{i}.json"))
        for i in range(3)
    ]
    version = 0
    deadline = time.monotonic() + 55
    while time.monotonic() < deadline and (version < 30 or time.monotonic() < deadline - 40):
        version += 1
        write_files(vault, notes(60, version))
        report = build_index(vault, wait_seconds=30, keep=3)
        published[report.generation_id] = f"{version:04d}"
    for proc in readers:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    stats = [json.loads((tmp_path / f"reader{i}.json").read_text()) for i in range(3)]
    searches = sum(s["ok"] for s in stats)
    print(f"soak: {searches} searches, {version} generations, {sum(s['failed'] for s in stats)} failed")
    assert version >= 30
    assert [s["failed"] for s in stats] == [0, 0, 0], [s["errors"] for s in stats]
    assert [s["mixed"] for s in stats] == [0, 0, 0]
    for s in stats:
        for gid, markers in s["seen"].items():
            assert gid in published, gid  # never a generation that was not published
            assert markers == [published[gid]], (gid, markers)  # its content is that generation's
    assert searches > 100
