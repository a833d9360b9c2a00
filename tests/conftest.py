"""Shared fixtures: built vaults for the search tests.

``example_vault`` is a built copy of examples/vault, shared by the whole session: tests
must treat it as read-only. ``make_vault`` writes a small vault from ``{rel_path: text}``
and builds it in a fresh directory per call; modules that only read a vault build it once
in a module-scoped fixture of their own.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from core.build.builder import IndexConfig, build_index

EXAMPLE_VAULT = Path(__file__).resolve().parent.parent / "examples" / "vault"

MakeVault = Callable[..., Path]


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
