"""Crash safety of a multi-part publish (issue 29, step 2a): SIGKILL the publishing process at each step of
each new part (the first segment's and the tombstone's, the last part), of the manifest, at the state
commit, retention and the removal of unreferenced parts. Afterwards exactly one verified generation is
active (the previous one before the state commit, the new one after it: never a mixed one), it answers
with every one of its live notes, and the next publish removes whatever the dead process left behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.build.lock import build_lock
from core.build.publish import PUBLISH_STEPS
from core.build.publish_segments import stage_split
from core.index import verify
from core.index.layout import IndexLayout, layout_for
from core.index.state import list_generations
from tests.index.test_segmented import base, publish_split, split_ids  # noqa: F401, F811 (fixture)

REPO = Path(__file__).resolve().parents[2]
PART_STEPS = PUBLISH_STEPS[: PUBLISH_STEPS.index("manifest_write")]
COMMITTED_AT = PUBLISH_STEPS.index("state_commit") + 1
# (step, which occurrence): each part step of the first and of the last new part, then every later step once
MATRIX = (
    [(s, 1) for s in PART_STEPS] + [(s, 3) for s in PART_STEPS] + [(s, 1) for s in PUBLISH_STEPS[len(PART_STEPS) :]]
)

CHILD = """
import json, os, signal, sys
from pathlib import Path
from core.build.lock import build_lock
from core.build.publish_segments import PlannedPart, publish_segments
from core.index.layout import GenerationRecord, layout_for
from core.index.state import active_record
vault, index_dir, step, nth, plan = sys.argv[1:6]
layout = layout_for(Path(vault), Path(index_dir))
seen = {}
def hook(name):
    seen[name] = seen.get(name, 0) + 1
    if name == step and seen[name] == int(nth):
        os.kill(os.getpid(), signal.SIGKILL)
doc = json.loads(plan)
segs = [PlannedPart("segment", Path(p[0]), notes=p[1], chunks=p[2]) for p in doc["segments"]]
stones = [PlannedPart("tombstone", Path(p[0]), notes=p[1], segment=p[2]) for p in doc["tombstones"]]
record = GenerationRecord(source_snapshot_hash="child", notes=doc["live"], chunks=0, dense_chunks=0, chunker="c",
                          tokenizer="t", timings={}, problems=[])
with build_lock(layout):
    base = active_record(layout)
    publish_segments(layout, segs, stones, record, next_ids=(10000, 100000), on_step=hook,
                     expected_base=base["generation_id"], grace_s=0.0)
"""


def _listed(layout: IndexLayout) -> set[str]:
    names = set()
    for row in list_generations(layout):
        if row["status"] == "ready":
            doc = json.loads((layout.manifests_dir / row["file_name"]).read_bytes())
            names |= {f"{s['sha256']}.seg" for s in doc["segments"]}
            names |= {f"{t['sha256']}.del" for t in doc["tombstones"]}
    return names


@pytest.mark.parametrize(("step", "nth"), MATRIX)
def test_sigkill_at_each_step_of_a_multi_part_publish(
    base: tuple[Path, Path, list[int], str],  # noqa: F811 (the imported fixture)
    tmp_path: Path,
    step: str,
    nth: int,
) -> None:
    root, segment, ids, tokenizer = base
    layout = layout_for(root, tmp_path / "idx")
    previous = publish_split(layout, segment, split_ids(ids, 2, random.Random(1)), set(ids[:2]), tokenizer)
    dead = set(ids[-3:])
    with build_lock(layout):  # staged under the lock, as a builder does; the child takes the lock again
        segments, stones, live = stage_split(
            layout, segment, [ids[: len(ids) // 2], ids[len(ids) // 2 :]], dead, tokenizer
        )
    assert len(segments) + len(stones) == 3  # the tombstone (of the second segment) is the third new part
    plan = {
        "segments": [[str(p.staged), p.notes, p.chunks] for p in segments],
        "tombstones": [[str(p.staged), p.notes, p.segment] for p in stones],
        "live": live,
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(layout.index_dir), step, str(nth), json.dumps(plan)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    verify.clear_verify_cache()
    served = verify.resolve(layout)
    if PUBLISH_STEPS.index(step) < COMMITTED_AT:
        assert served.generation_id == previous.generation_id
    else:
        assert served.record["source_snapshot_hash"] == "child"
        assert sum(p.kind == "tombstone" for p in served.parts) == 1
    assert verify.verify_full(layout)["generation_id"] == served.generation_id
    conn = verify.connect_readonly(served)
    try:
        count = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
    finally:
        conn.close()
    assert count == (len(ids) - 2 if served.generation_id == previous.generation_id else live)
    newest = publish_split(layout, segment, [ids], set(), tokenizer)  # the next publish cleans up
    verify.clear_verify_cache()
    assert verify.resolve(layout).generation_id == newest.generation_id
    assert verify.verify_full(layout)["orphans"] == []
    assert list(layout.staging_dir.iterdir()) == []
    assert {p.name for p in layout.segments_dir.iterdir()} == _listed(layout)
