"""Crash safety of a merge (issue 29, "Must show"): SIGKILL the merging process once it wrote a merged
segment, and at each step of each merged segment's publish (the first and the second of two merges), of the manifest, at the state commit, retention
and the removal of unreferenced parts. Afterwards exactly one verified generation is active (the one before
the merge until the state commit, the merged one after it: never a mixed one), it answers with the same live
notes either way, and the next merge or build removes whatever the dead process left behind. The harness is
tests/index/test_segmented_crash.py's.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.build.optimize import segment_infos
from core.build.publish import PUBLISH_STEPS
from core.index import verify
from core.index.layout import layout_for
from tests.index.test_segmented import base, publish_split, split_ids  # noqa: F401 (fixture)
from tests.index.test_segmented_crash import COMMITTED_AT, PART_STEPS, REPO, _listed

# (step, which occurrence): the writing of the first merged segment, each part step of the first and of the
# second merged segment, then every later step
MATRIX = (
    [("segment_write", 1)]
    + [(s, 1) for s in PART_STEPS]
    + [(s, 2) for s in PART_STEPS]
    + [(s, 1) for s in PUBLISH_STEPS[len(PART_STEPS) :]]
)

CHILD = """
import os, signal, sys
from pathlib import Path
from core.build.lock import build_lock
from core.build.merge import Merge
from core.build.optimize import merge_generation
from core.index.layout import layout_for
from core.index.verify import resolve
vault, index_dir, step, nth = sys.argv[1:5]
layout = layout_for(Path(vault), Path(index_dir))
seen = {}
def hook(name):
    seen[name] = seen.get(name, 0) + 1
    if name == step and seen[name] == int(nth):
        os.kill(os.getpid(), signal.SIGKILL)
if step == "segment_write":  # killed once the first merged segment is written, before any publish step
    import core.build.merge_write as mw
    real = mw.write_segment
    def killing(*args, **kwargs):
        real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    mw.write_segment = killing
with build_lock(layout):
    merge_generation(layout, resolve(layout), [Merge((0, 1), "tier"), Merge((2, 3), "tier")], on_step=hook,
                     grace_s=0.0)
"""


def _live_paths(served: verify.ResolvedIndex) -> list[str]:
    conn = verify.connect_readonly(served)
    try:
        return [r[0] for r in conn.execute("SELECT rel_path FROM notes ORDER BY rel_path")]
    finally:
        conn.close()


@pytest.mark.parametrize(("step", "nth"), MATRIX)
def test_sigkill_at_each_step_of_a_merge(
    base: tuple[Path, Path, list[int], str],  # noqa: F811 (the imported fixture)
    tmp_path: Path,
    step: str,
    nth: int,
) -> None:
    root, segment, ids, tokenizer = base
    layout = layout_for(root, tmp_path / "idx")
    previous = publish_split(layout, segment, split_ids(ids, 4, random.Random(2)), set(ids[1:4]), tokenizer)
    live = _live_paths(previous)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(layout.index_dir), step, str(nth)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    verify.clear_verify_cache()
    served = verify.resolve(layout)
    if step == "segment_write" or PUBLISH_STEPS.index(step) < COMMITTED_AT:
        assert served.generation_id == previous.generation_id
        assert len(segment_infos(served)) == 4
    else:
        assert served.generation_id != previous.generation_id
        assert [s.dead for s in segment_infos(served)] == [0, 0]  # both merges, their dead rows gone
    assert verify.verify_full(layout)["generation_id"] == served.generation_id
    assert _live_paths(served) == live  # the same live notes either way
    if step == "segment_write":
        assert list(layout.staging_dir.iterdir())  # the dead process's merged segment, never published
    newest = publish_split(layout, segment, [ids], set(), tokenizer)  # the next publish cleans up
    verify.clear_verify_cache()
    assert verify.resolve(layout).generation_id == newest.generation_id
    assert verify.verify_full(layout)["orphans"] == []
    assert list(layout.staging_dir.iterdir()) == []
    assert {p.name for p in layout.segments_dir.iterdir()} == _listed(layout)
