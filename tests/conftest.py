"""Shared fixtures: built vaults for the search tests.

``example_vault`` is a built copy of examples/vault, shared by the whole session: tests
must treat it as read-only. ``make_vault`` writes a small vault from ``{rel_path: text}``
and builds it in a fresh directory per call; modules that only read a vault build it once
in a module-scoped fixture of their own.
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
import shutil
import sqlite3
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from core.build.builder import IndexConfig, build_index
from core.build.forward_rows import load_working, read_forward

EXAMPLE_VAULT = Path(__file__).resolve().parent.parent / "examples" / "vault"

MakeVault = Callable[..., Path]


def with_working(conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn`` with a writer's working tables (terms, note_terms, chunk_terms: TEMP tables) filled from its
    stored arrays, as the build fills them; committed, so a reader's connection is left out of a transaction."""
    load_working(conn)
    if conn.in_transaction:
        conn.commit()
    return conn


def note_vectors(conn: sqlite3.Connection) -> dict[int, list[tuple[str, bytes]]]:
    """Note id -> its term vector, sorted (term, per-field tf bytes), of every live note of the generation
    ``conn`` serves: each segment's rows derived from its term-major arrays (a segment stores no forward rows)."""
    live = {int(r[0]) for r in conn.execute("SELECT id FROM notes")}
    out: dict[int, list[tuple[str, bytes]]] = {}
    for _, schema, path in conn.execute("PRAGMA database_list").fetchall():
        if schema == "temp" or not path:
            continue
        part = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tombstone = part.execute("SELECT 1 FROM sqlite_master WHERE name = 'dead'").fetchone() is not None
            forward = None if tombstone else read_forward(part)
        finally:
            part.close()
        word = {i: t for t, i in forward.terms.items()} if forward is not None else {}
        for nid, ids, tf in forward.notes if forward is not None else ():
            if nid in live:
                out[nid] = sorted((word[int(i)], row.tobytes()) for i, row in zip(ids, tf, strict=True))
    return out


def write_vault(root: Path, files: Mapping[str, str]) -> Path:
    """Write ``files`` (rel_path -> text, dedented) under ``root`` and return it."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def write_files(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write ``files`` (rel_path -> exact text, or raw bytes) under ``root`` and return it."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def note(title: str, body: str, **front: object) -> str:
    """A note's text: YAML frontmatter (title + ``front``; lists in flow style) and a body."""
    lines = ["---", f"title: {title}"]
    for key, value in front.items():
        if isinstance(value, (list, tuple)):
            value = "[" + ", ".join(str(v) for v in value) + "]"
        lines.append(f"{key}: {value}")
    lines += ["---", "", textwrap.dedent(body).strip(), ""]
    return "\n".join(lines)


@pytest.fixture(scope="session")
def make_vault(tmp_path_factory: pytest.TempPathFactory) -> MakeVault:
    """Factory: ``make_vault(files, *, build=True, in_place=False, config=None, name="vault")``.

    Each call gets its own directory, so a test may change the vault it made.
    """

    def make(
        files: Mapping[str, str],
        *,
        build: bool = True,
        in_place: bool = False,
        config: IndexConfig | None = None,
        name: str = "vault",
    ) -> Path:
        root = write_vault(tmp_path_factory.mktemp(name), files)
        if build:
            build_index(root, in_place=in_place, config=config)
        return root

    return make


@pytest.fixture(scope="session")
def example_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built copy of examples/vault (read-only for tests: it is shared by the session)."""
    root = tmp_path_factory.mktemp("example") / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    return root


@pytest.fixture
def example_vault_copy(tmp_path: Path) -> Path:
    """A private built copy of examples/vault that a test may modify or corrupt."""
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    return root


@pytest.fixture(scope="session")
def model_dirs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The MiniLM model directories (fp32, int8, the pair "reranker"), built once and cached
    across runs in the pytest cache (tests/minilm_fixture.py); shared by every dense test."""
    from tests.minilm_fixture import cached_model_dirs, fixture_root

    return cached_model_dirs(fixture_root(request, tmp_path_factory))


@pytest.fixture(autouse=True)
def patient_watch_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search falls back to the stat walk (labelled ``watch_fallback``) when the watcher has not
    caught up within two event lags and ``CATCH_UP_MARGIN_SECONDS``: correct, but a test that asserts
    the watcher's own answer would then depend on the machine's load. Raised for the readers in the
    test process; nothing asserts a wait's length."""
    from core.index import watch_state

    monkeypatch.setattr(watch_state, "CATCH_UP_MARGIN_SECONDS", 30.0)


# ---------------------------------------------------------------- one test process, many modules


def clear_loaded_process_caches() -> None:
    """Empty the per-process caches of every core module loaded so far (none is imported here).

    They are keyed per index dir (or model) and kept for the process's life: right for a server
    with one vault, a steady growth for a test process that builds hundreds of vaults.
    """
    modules = sys.modules
    if "core.ranking.sparse" in modules:
        sparse = modules["core.ranking.sparse"]
        for cache in (sparse.SPARSE_CACHE, sparse.CHUNK_CACHE, sparse.GRAPH_CACHE):
            cache.clear()
    if "core.ranking.visibility" in modules:
        modules["core.ranking.visibility"].VISIBILITY_CACHE.clear()
    if "core.modes.dense_pipeline" in modules:
        modules["core.modes.dense_pipeline"].DENSE_CACHE.clear()
        modules["core.modes.dense_pipeline"].PART_CACHE.clear()
        modules["core.modes.dense_pipeline"].clear_model_caches()  # embedders and rerankers
    if "core.dense" in modules:
        modules["core.dense"].clear_model_cache()
    if "core.modes.segment_arrays" in modules:  # each segment's arrays, and each generation's combination
        modules["core.modes.segment_arrays"].SEGMENT_CACHE.clear()
        modules["core.modes.segment_arrays"].COMBINED_CACHE.clear()


GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
LEFT_RESIDENT_BYTES = 32 * 2**20  # more left resident by one test than this: its cycles are collected


def resident_bytes() -> int:
    """This process's resident set (Linux: /proc/self/statm), else 0."""
    statm = Path("/proc/self/statm")
    if not statm.exists():
        return 0
    return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def trim_heap() -> None:
    """Have glibc return the free pages of its heaps to the system (other C libraries: nothing to do).

    glibc keeps what an ONNX session or a large array freed, so without it a test process grows by
    every model and corpus it has met (an xdist worker reached 1.4 GB by the suite's end).
    """
    if GLIBC:
        ctypes.CDLL(None).malloc_trim(0)


@pytest.fixture(autouse=True)
def each_test_gives_its_freed_memory_back() -> Iterator[None]:
    """After a test that left more than ``LEFT_RESIDENT_BYTES`` resident: the heap trimmed and, if
    that was not enough, its reference cycles collected (a ``pytest.raises`` traceback holds the
    frames, and with them e.g. a refused model's ONNX session) and the heap trimmed again."""
    before = resident_bytes()
    yield
    if resident_bytes() - before > LEFT_RESIDENT_BYTES:
        trim_heap()
        if resident_bytes() - before > LEFT_RESIDENT_BYTES:
            gc.collect()
            trim_heap()


@pytest.fixture(autouse=True, scope="module")
def each_module_starts_with_empty_process_caches() -> Iterator[None]:
    """After each test module: the process caches emptied, cycles collected, the heap trimmed, so a
    test process's peak is its heaviest module's, not the sum of every module it ran."""
    yield
    clear_loaded_process_caches()
    gc.collect()
    trim_heap()


@pytest.fixture
def whole_reads(monkeypatch) -> list[str]:
    """The names of the stored arrays read whole from now on (``StoredArray.__array__``), a process kept a
    piece reader throughout (core.ranking.stored reads an array whole once it has gathered from it often, and
    core.modes.segment_arrays a small segment whole): any whole read is one the code under test asked for."""
    from core.modes import segment_arrays
    from core.ranking import stored

    monkeypatch.setattr(stored, "WHOLE_AFTER_GATHERS", 10**9)
    monkeypatch.setattr(segment_arrays, "WHOLE_SEGMENT_BYTES", 0)  # every segment read a piece at a time
    names: list[str] = []
    real = stored.StoredArray.__array__

    def read_whole(self, *args, **kwargs):
        names.append(self._name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(stored.StoredArray, "__array__", read_whole)
    return names
