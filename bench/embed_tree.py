"""A whole ``--embed`` by one code tree, for a before/after of embedding cost in one sitting (issue #14).

Runs the vaultsearch source tree in CODE (e.g. ``git archive 340614e | tar -x -C /tmp/before``) on VAULT:
builds a fresh index in WORK, then ``embed_index(threads=2)`` with the model directory MODEL, and writes
wall seconds, chunks given a vector, of those reused from an identical text, and chunks/s to OUT (JSON).
The editable install's import hook is dropped so that CODE really is what runs; trees from before the
package layout (``core.builder``, ``core.embed``) are supported.

    python bench/embed_tree.py CODE VAULT WORK MODEL OUT
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path


def main(code: str, vault: str, work: str, model: str, out: str) -> dict[str, object]:
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
    sys.path.insert(0, code)
    try:
        from core.build.builder import build_index
        from core.build.embed import embed_index
    except ImportError:  # a tree from before the package layout
        from core.builder import build_index  # type: ignore[import-not-found,no-redef]
        from core.embed import embed_index  # type: ignore[import-not-found,no-redef]
    import core

    if not str(Path(core.__file__).resolve()).startswith(str(Path(code).resolve())):
        raise SystemExit(f"imported {core.__file__}, not the tree in {code}")
    shutil.rmtree(work, ignore_errors=True)
    t = time.perf_counter()
    build_index(Path(vault), index_dir=Path(work))
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    report = embed_index(Path(vault), model=model, index_dir=Path(work), threads=2)
    wall = time.perf_counter() - t
    result = {
        "code": code,
        "vault": vault,
        "build_s": round(build_s, 1),
        "wall_s": round(wall, 1),
        "embedded": report.embedded,
        "reused": getattr(report, "reused", None),
        "chunks": report.chunks,
        "complete": report.complete,
        "chunks_per_s": round(report.chunks / wall, 2),
    }
    Path(out).write_text(json.dumps(result))
    return result


if __name__ == "__main__":
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    print(json.dumps(main(*sys.argv[1:6])))
