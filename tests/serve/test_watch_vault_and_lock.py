"""The watcher never creates the vault, and one watcher per index holds however its files are
tampered with (issue 28, case 13)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.build.watch import Watcher
from core.errors import VaultSearchError, WatchRunningError
from tests.serve.serve_helpers import make_serve_vault


@pytest.mark.parametrize("how", ["deleted", "moved"])
def test_a_watcher_whose_vault_goes_stops_with_vault_missing_and_never_recreates_it(tmp_path: Path, how: str):
    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    watcher = Watcher(vault, debounce_ms=50, lock_wait=0.0)
    thread = watcher.start()
    try:
        assert watcher.ready.wait(60), "the first watch build"
        if how == "deleted":
            for _ in range(100):  # the watcher may write watch.json while the tree goes: delete again
                shutil.rmtree(vault, ignore_errors=True)
                if not vault.exists():
                    break
        else:
            vault.rename(tmp_path / "elsewhere")
        thread.join(30)
        assert not thread.is_alive(), "the watcher stops"
        assert not vault.exists(), "the vault folder is never recreated"
        assert watcher.error is not None and watcher.error.reason == "vault_missing"
    finally:
        watcher.stop()


def test_a_second_watcher_is_refused_after_the_first_ones_lock_file_was_deleted(tmp_path: Path):
    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    first = Watcher(vault, debounce_ms=50, lock_wait=0.0)
    first.start()
    try:
        assert first.ready.wait(60)
        for name in ("watch.lock", "watch.json"):  # the lock file of today's code, and the state file
            (first.layout.index_dir / name).unlink(missing_ok=True)
        with pytest.raises(WatchRunningError) as info:
            Watcher(vault, lock_wait=0.0).start()
        assert info.value.reason == "watch_already_running"
        from core.index.watch_state import watcher_running

        assert watcher_running(first.layout.index_dir)  # readers still see the first watcher
    finally:
        first.stop()


def test_an_index_that_cannot_be_opened_while_an_event_is_sorted_leaves_the_event_thread_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The event thread asks the active generation whether a deleted folder held notes; a generation
    file gone between its resolve and its open (a publish, the vault being deleted) raised
    ``generation_changed`` out of the event thread, which stopped the watcher with that instead of
    ``vault_missing`` (seen once in CI). The index cannot say: a walk decides."""
    from core.build import watch_paths
    from core.errors import GenerationChangedError

    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    watcher = Watcher(vault, debounce_ms=50, lock_wait=0.0)
    thread = watcher.start()
    try:
        assert watcher.ready.wait(60), "the first watch build"

        def gone(resolved):  # noqa: ANN001, ANN202
            raise GenerationChangedError("generation file cannot be opened", path=str(resolved.path))

        monkeypatch.setattr(watch_paths, "connect_readonly", gone)
        assert watcher._holds_notes_under("notes") is True
    finally:
        watcher.stop()
        thread.join(30)


def test_a_vault_deleted_while_the_watcher_writes_its_state_stops_it_with_vault_missing(tmp_path: Path, monkeypatch):
    """The vault (and the index dir inside it) going between the watcher's check and its write of
    watch.json is the typed ``vault_missing``, not a bare FileNotFoundError (a CI run hit this race)."""
    from core.build import watch

    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    watcher = Watcher(vault, debounce_ms=50, lock_wait=0.0)
    watcher._claim()
    real = watch.write_state

    def vault_goes_first(index_dir: Path, state: dict) -> None:
        shutil.rmtree(vault)
        real(index_dir, state)

    monkeypatch.setattr(watch, "write_state", vault_goes_first)
    try:
        with pytest.raises(VaultSearchError) as err:
            watcher._save()
        assert err.value.reason == "vault_missing"
    finally:
        monkeypatch.setattr(watch, "write_state", real)
        watcher.stop()
