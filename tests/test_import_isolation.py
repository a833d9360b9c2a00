"""The read path never loads the write path: ``import core.searcher`` in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

WRITE_PATH = (
    "core.build.builder",
    "core.build.ingest",
    "core.build.embed",
    "core.vault.scan",
    "core.vault.notes",
    "core.vault.chunking",
    "core.vault.links",
    "multiprocessing",
)


def loaded_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_import_core_searcher_loads_no_build_module() -> None:
    loaded = loaded_after("import core.searcher")
    assert "core.searcher" in loaded
    assert not loaded & set(WRITE_PATH), sorted(loaded & set(WRITE_PATH))
    # the whole write path lives in core.build (publish and the build lock included), and the read path
    # reaches the stored index through core.index, never through the core.generations facade
    write_side = sorted(
        m for m in loaded if m == "core.build" or m.startswith("core.build.") or m == "core.generations"
    )
    assert write_side == []


def test_the_package_root_loads_the_builder_only_on_use() -> None:
    assert "core.build.builder" not in loaded_after("import core")
    assert "core.build.builder" in loaded_after("from core import build_index")
