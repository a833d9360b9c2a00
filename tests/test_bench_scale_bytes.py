"""bench/bench_scale.py's active generation bytes: the manifest and every part it lists (a segmented
generation's manifest alone is a few hundred bytes; the scaling table said 0.0 MiB)."""

from __future__ import annotations

from pathlib import Path

from bench.bench_scale import _generation_bytes
from core.build.builder import build_index


def test_the_active_generation_is_its_manifest_and_its_parts(example_vault_copy: Path) -> None:
    vault = example_vault_copy
    note = sorted(vault.rglob("*.md"))[0]
    note.write_text(note.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    build_index(vault)  # a delta segment and a tombstone beside the first segment
    index_dir = vault / ".vaultsearch"
    manifest = max((index_dir / "manifests").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    listed = manifest.read_text(encoding="utf-8")
    parts = [p for p in (index_dir / "segments").iterdir() if p.name.split(".")[0] in listed]
    assert len(parts) >= 3
    assert _generation_bytes(vault, index_dir) == manifest.stat().st_size + sum(p.stat().st_size for p in parts)
