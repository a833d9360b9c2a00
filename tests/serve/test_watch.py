"""The watcher: an edited, an added and a deleted note reach a running server without a restart;
a failed build keeps the old generation serving and shows in status and freshness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import generations as gen
from core.build.watch import Watcher
from core.index.status import index_status
from core.index.watch_state import WATCH_FILE
from core.searcher import search_vault
from tests.conftest import note
from tests.serve.serve_helpers import HttpServer, StdioSession, make_serve_vault, wait_until


def _paths(session: StdioSession, query: str) -> set[str]:
    return {h["path"] for h in session.call("search", {"q": query, "mode": "fts", "max_results": 50})["hits"]}


def test_mcp_watch_reflects_an_edit_an_addition_and_a_deletion_without_restart(tmp_path: Path):
    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")  # not built: the watcher builds it
    session = StdioSession([str(vault), "--watch", "--debounce-ms", "100"])
    try:
        armed = lambda: not session.call_raw("status").is_error and session.call("status")["watch"]["armed"]  # noqa: E731
        wait_until(armed, what="the first watch build and the watch armed")
        first = session.call("status")
        assert first["watch"]["enabled"] is True and first["generation_id"]
        (vault / "notes/beta.md").write_text(note("Beta harbour", "Beta now mentions a quokka."), encoding="utf-8")
        (vault / "notes/gamma.md").write_text(note("Gamma", "Another quokka lives here."), encoding="utf-8")
        (vault / "notes/old.md").unlink()
        wait_until(lambda: _paths(session, "quokka") == {"notes/beta.md", "notes/gamma.md"}, what="edit + add")
        wait_until(lambda: "notes/old.md" not in _paths(session, "harbour tides"), what="the deletion")
        env = session.call("search", {"q": "quokka", "mode": "fts"})
        assert env["freshness"]["stale"] is False and env["index"]["generation_id"] != first["generation_id"]
        assert session.call("status")["watch"]["last_build"]["ok"] is True
    finally:
        session.close()


def test_a_failed_watch_build_keeps_the_old_generation_and_says_so(tmp_path: Path):
    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    watcher = Watcher(vault, lock_wait=0.0)
    watcher._claim()  # only the watcher holding the watch lock writes watch.json
    assert watcher.build_once().ok
    served = gen.active_record(gen.layout_for(vault))["generation_id"]
    (vault / "notes/beta.md").write_text(note("Beta", "Beta mentions a wombat."), encoding="utf-8")
    with gen.build_lock(gen.layout_for(vault)):  # another builder holds the lock: this build fails
        outcome = watcher.build_once({"notes/beta.md"})
    assert (outcome.ok, outcome.reason) == (False, "build_locked")
    state = json.loads((vault / ".vaultsearch" / WATCH_FILE).read_text())
    assert state["last_failure"]["reason"] == "build_locked"
    results = search_vault(vault, "wombat", 10, "fts")
    assert results.index.generation_id == served and list(results) == []
    fresh = results.freshness
    assert fresh["stale"] is True and fresh["last_build_failure"]["reason"] == "build_locked"
    assert index_status(vault)["last_build_failure"]["reason"] == "build_locked"
    assert watcher.build_once({"notes/beta.md"}).ok  # the next build clears it
    healed = search_vault(vault, "wombat", 10, "fts")
    assert "last_build_failure" not in healed.freshness and [r.rel_path for r in healed] == ["notes/beta.md"]
    watcher._release()


@pytest.mark.parametrize(
    ("path", "relevant"),
    [
        ("notes/a.md", True),
        ("notes/A.MD", True),
        (".vaultsearchignore", True),
        ("notes/a.txt", False),
        (".git/x.md", False),
        (".vaultsearch/generations/g.db", False),
    ],
)
def test_only_note_and_ignore_file_changes_trigger_a_build(tmp_path: Path, path: str, relevant: bool):
    watcher = Watcher(tmp_path)
    assert (watcher._relevant(str(tmp_path.resolve() / path)) is not None) is relevant


@pytest.mark.slow
def test_serve_watch_reflects_each_change_on_its_own(tmp_path: Path):
    import httpx

    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    server = HttpServer([str(vault), "--watch", "--debounce-ms", "100"])
    try:
        client = httpx.Client(base_url=server.base, timeout=30)
        wait_until(lambda: client.get("/status").json().get("watch", {}).get("armed"), what="the watch armed")

        def paths(q: str) -> set[str]:
            return {h["path"] for h in client.post("/search", json={"q": q, "mode": "fts"}).json()["hits"]}

        (vault / "notes/beta.md").write_text(note("Beta", "Beta mentions a numbat."), encoding="utf-8")
        wait_until(lambda: paths("numbat") == {"notes/beta.md"}, what="the edit")
        (vault / "notes/delta.md").write_text(note("Delta", "A numbat again."), encoding="utf-8")
        wait_until(lambda: paths("numbat") == {"notes/beta.md", "notes/delta.md"}, what="the addition")
        (vault / "notes/beta.md").unlink()
        wait_until(lambda: paths("numbat") == {"notes/delta.md"}, what="the deletion")
        assert client.post("/search", json={"q": "numbat"}).json()["freshness"]["stale"] is False
    finally:
        server.close()


def test_the_watch_command_publishes_on_change_and_reports_each_build(tmp_path: Path):
    import subprocess

    from tests.serve.serve_helpers import VAULTSEARCH

    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    proc = subprocess.Popen(
        [VAULTSEARCH, "watch", str(vault), "--json", "--debounce-ms", "100"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())  # the first build, after the watch is armed
        assert first["ok"] is True and first["generation_id"]
        (vault / "notes/gamma.md").write_text(note("Gamma", "A bilby."), encoding="utf-8")
        built = json.loads(proc.stdout.readline())
        assert built["ok"] is True and built["changed_paths"] == ["notes/gamma.md"]
        assert built["generation_id"] != first["generation_id"]
        assert [r.rel_path for r in search_vault(vault, "bilby", 5, "fts")] == ["notes/gamma.md"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_generation_the_watcher_publishes_is_warmed_before_searches_reach_it(tmp_path: Path):
    from core.modes.segment_arrays import COMBINED_CACHE
    from core.ranking.sparse import SPARSE_CACHE
    from core.ranking.visibility import VISIBILITY_CACHE
    from core.serve.tools import ServeConfig, Tools

    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    tools = Tools(ServeConfig(vault))
    published: list[bool] = []

    def on_publish() -> None:
        published.append(True)
        tools.generation_published()
        assert not tools._warm.is_set()  # searches arriving now wait for the warm-up

    watcher = Watcher(vault, on_publish=on_publish, on_build=tools.warm)
    watcher.build_once()
    loads = SPARSE_CACHE.loads + COMBINED_CACHE.loads
    (vault / "notes/beta.md").write_text(note("Beta", "Beta mentions a dibbler."), encoding="utf-8")
    outcome = watcher.build_once({"notes/beta.md"})
    assert outcome.ok and published == [True, True] and tools._warm.is_set() and tools.warm_failure is None
    # the watcher loaded the new generation's sparse index: a delta publish is several segments, combined
    assert SPARSE_CACHE.loads + COMBINED_CACHE.loads == loads + 1
    restricted = VISIBILITY_CACHE.loads  # the server's classifications hide the lan and restricted notes
    env = tools.call("search", {"q": "dibbler", "mode": "fts"})
    assert [h["path"] for h in env["hits"]] == ["notes/beta.md"] and env["index"][
        "generation_id"
    ] == outcome.generation_id
    assert SPARSE_CACHE.loads + COMBINED_CACHE.loads == loads + 1  # ... so the search found it warm
    assert VISIBILITY_CACHE.loads == restricted  # ... as the server's callers see it (warmed with its classes)


# ---------------------------------------------------------------- freshness from the watcher's state


@pytest.fixture
def watched(tmp_path: Path):
    """A vault with a running in-process watcher (debounce 50 ms); yields (vault, watcher)."""
    from core.index.freshness import clear_cache

    clear_cache()
    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    watcher = Watcher(vault, debounce_ms=50, lock_wait=0.0)
    watcher.start()
    assert watcher.ready.wait(60), "the first watch build"
    yield vault, watcher
    watcher.stop()


def _fresh(vault: Path) -> dict:
    return search_vault(vault, "harbour", 10, "fts").freshness


def _fresh_when(vault: Path, ok) -> dict | None:
    fresh = _fresh(vault)
    return fresh if ok(fresh) else None


def _hits(vault: Path, query: str) -> set[str]:
    return {r.rel_path for r in search_vault(vault, query, 10, "fts", freshness=False)}


def test_with_a_watcher_freshness_is_its_state_and_a_change_during_a_build_stays_stale_until_built(
    tmp_path: Path, monkeypatch
):
    import threading

    import core.build.builder as builder

    real, gate, entered = builder.build_index, threading.Event(), threading.Event()
    gate.set()

    def gated(*args, **kwargs):
        entered.set()
        assert gate.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(builder, "build_index", gated)
    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    watcher = Watcher(vault, debounce_ms=50)
    watcher.start()
    try:
        assert watcher.ready.wait(60)
        fresh = _fresh(vault)
        assert (fresh["checked"], fresh["source"], fresh["stale"], fresh["pending_build"]) == (
            True,
            "watch",
            False,
            False,
        )
        gate.clear()
        entered.clear()
        (vault / "notes/beta.md").write_text(note("Beta", "Beta mentions a quoll."), encoding="utf-8")
        assert entered.wait(30)  # its build started, and waits
        (vault / "notes/new.md").write_text(note("New", "A quoll too."), encoding="utf-8")  # during the build
        (vault / "notes/old.md").unlink()
        expect = {"notes/beta.md", "notes/new.md", "notes/old.md"}
        stale = wait_until(lambda: _fresh_when(vault, lambda f: set(f["sample_paths"]) == expect), what="events")
        assert (stale["source"], stale["stale"], stale["pending_build"]) == ("watch", True, True)
        assert (stale["added"], stale["modified"], stale["removed"]) == (1, 1, 1)
        gate.set()
        wait_until(lambda: _fresh(vault)["stale"] is False, what="the builds that cover every change")
        assert _hits(vault, "quoll") == {"notes/beta.md", "notes/new.md"} and _fresh(vault)["source"] == "watch"
    finally:
        gate.set()
        watcher.stop()


def test_a_failed_watch_build_leaves_its_changes_stale_with_the_error_then_a_retry_heals(watched):
    vault, watcher = watched
    with gen.build_lock(gen.layout_for(vault)):  # another builder holds the lock: the watch build fails
        (vault / "notes/beta.md").write_text(note("Beta", "Beta mentions a wombat."), encoding="utf-8")
        wait_until(lambda: watcher.last is not None and not watcher.last.ok, what="the failed build")
        fresh = _fresh(vault)
        assert (fresh["source"], fresh["stale"], fresh["sample_paths"]) == ("watch", True, ["notes/beta.md"])
        assert fresh["last_build_failure"]["reason"] == "build_locked"
    healed = wait_until(lambda: _fresh_when(vault, lambda f: not f["stale"]), what="the retry")  # no new edit
    assert "last_build_failure" not in healed and _hits(vault, "wombat") == {"notes/beta.md"}


def test_a_second_watcher_of_one_index_is_refused(watched):
    import subprocess

    from core.errors import WatchRunningError
    from tests.serve.serve_helpers import VAULTSEARCH

    vault, _ = watched
    with pytest.raises(WatchRunningError) as info:
        Watcher(vault).start()
    assert info.value.reason == "watch_already_running"
    done = subprocess.run([VAULTSEARCH, "watch", str(vault)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 6 and "watch_already_running" in done.stderr


def test_another_process_reads_a_running_watchers_state_and_stops_trusting_it_when_it_ends(tmp_path: Path):
    import subprocess

    from core.index.freshness import clear_cache
    from tests.serve.serve_helpers import VAULTSEARCH

    clear_cache()
    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    proc = subprocess.Popen([VAULTSEARCH, "watch", str(vault), "--json", "--debounce-ms", "50"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and json.loads(proc.stdout.readline())["ok"] is True
        assert _fresh(vault)["source"] == "watch"
        (vault / "notes/gamma.md").write_text(note("Gamma", "A bilby."), encoding="utf-8")
        wait_until(lambda: _hits(vault, "bilby") == {"notes/gamma.md"}, what="the build")
        fresh = _fresh(vault)
        assert (fresh["source"], fresh["stale"]) == ("watch", False)
    finally:
        proc.terminate()
        proc.wait(30)
    after = _fresh(vault)
    assert (after["source"], after["stale"]) == ("stat_walk", False)  # no live watcher: the walk answers


def test_a_moved_folder_is_rebuilt_and_only_a_walk_answers_until_then(watched):
    vault, _ = watched
    (vault / "notes").rename(vault / "moved")
    wait_until(lambda: "moved/beta.md" in _hits(vault, "harbour"), what="the folder move")
    assert not any(p.startswith("notes/") for p in _hits(vault, "harbour"))
    assert _fresh(vault)["stale"] is False


@pytest.mark.parametrize(
    ("make", "path", "expect"),
    [
        ("dir", "newdir", "rescan"),  # a folder created or moved in
        ("none", "notes", "rescan"),  # a vanished folder that held notes
        ("none", "gone.txt", None),  # a vanished file that is not a note
        ("none", "notes/x.md", "notes/x.md"),
    ],
)
def test_folder_events_ask_for_a_walk(tmp_path: Path, make: str, path: str, expect: str | None):
    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    watcher = Watcher(vault)
    assert watcher.build_once().ok
    if make == "dir":
        (vault / path).mkdir()
    else:
        import shutil

        shutil.rmtree(vault / "notes")
    got = watcher._relevant(str(vault.resolve() / path))
    assert (got if got is None or not got.startswith("\x00") else "rescan") == expect


def test_a_generation_published_by_someone_else_is_confirmed_by_the_watcher(watched):
    from core.build.builder import build_index

    vault, watcher = watched
    report = build_index(vault, changes={"chunk_size": 300}, wait_seconds=30)  # re-chunks: a new generation
    assert not report.up_to_date
    wait_until(lambda: watcher.view() is not None and watcher.view().baseline == report.generation_id, what="confirm")
    fresh = search_vault(vault, "harbour", 10, "fts")
    assert fresh.index.generation_id == report.generation_id and fresh.freshness["source"] == "watch"


def test_a_stopped_watcher_no_longer_answers_for_its_index(tmp_path: Path):
    from core.index import freshness

    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    watcher = Watcher(vault, debounce_ms=50)
    watcher.start()
    assert watcher.ready.wait(60) and _fresh(vault)["source"] == "watch"
    watcher.stop()
    assert str(watcher.layout.index_dir) not in freshness._WATCHERS and _fresh(vault)["source"] == "stat_walk"


def test_a_search_that_raced_a_publish_is_answered_for_the_generation_it_served(tmp_path: Path):
    from core.index.freshness import WatchView

    watcher = Watcher(tmp_path)
    watcher._armed.set()
    watcher._pending = {"a.md": 1.0, "b.md": 2.0, "late.md": 9.0}
    watcher._covered(0.0, "g1")  # the first build: nothing before it to cover
    watcher._covered(5.0, "g2")  # a build that started at 5 covers a.md and b.md, not late.md
    view = watcher.view()
    assert view is not None and (view.baseline, view.pending) == ("g2", ("late.md",))
    assert view.changed_since("g2") == (("late.md",), None)
    assert view.changed_since("g1") == (("a.md", "b.md", "late.md"), None)  # what g1 lacks: both builds' paths
    assert view.changed_since("g0") == (None, "generation_unknown_to_watcher")
    assert WatchView("g2", rescan=True).changed_since("g2") == (None, "folder_or_ignore_file_changed")


def test_a_note_saved_while_a_watch_build_runs_is_built_next_and_no_build_fails(tmp_path: Path, monkeypatch):
    import threading

    import core.build.builder as builder

    vault = make_serve_vault(tmp_path / "vault", tmp_path / "outside")
    outcomes: list = []
    watcher = Watcher(vault, debounce_ms=50, on_build=outcomes.append)
    watcher.start()
    try:
        assert watcher.ready.wait(60)
        real, saved = builder._validate, threading.Event()

        def validate_then_save(conn, plan):  # inside the build, after its scan and reads
            real(conn, plan)
            if not saved.is_set():
                saved.set()
                (vault / "notes/alpha.md").write_text(note("Alpha", "Alpha mentions a potoroo."), encoding="utf-8")

        monkeypatch.setattr(builder, "_validate", validate_then_save)
        (vault / "notes/beta.md").write_text(note("Beta", "Beta mentions a potoroo."), encoding="utf-8")
        wait_until(lambda: _hits(vault, "potoroo") == {"notes/alpha.md", "notes/beta.md"}, what="both saves")
        wait_until(lambda: not _fresh(vault)["stale"], what="fresh")
        assert all(o.ok for o in outcomes), [o.reason for o in outcomes if not o.ok]
    finally:
        watcher.stop()
