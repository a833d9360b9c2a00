"""Freshness in every search response: checked or not (and why), what changed, bounded cost."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core import cli
from core.build.builder import build_index
from core.index.freshness import FreshnessOptions, clear_cache
from core.searcher import search_vault
from tests.conftest import note, write_vault

FILES = {
    "a.md": note("Alpha", "The lighthouse keeper."),
    "b.md": note("Beta", "The harbour master."),
    "c.md": note("Gamma", "The lighthouse lamp."),
    "hidden/h.md": note("Hidden", "The lighthouse in secret.", classification="restricted"),
}
NOW = FreshnessOptions(window_seconds=0.0)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    clear_cache()
    root = write_vault(tmp_path / "v", FILES)
    build_index(root)
    return root


def test_a_fresh_vault_says_checked_and_not_stale(vault):
    fresh = search_vault(vault, "lighthouse", 10, "fts").freshness
    assert fresh["checked"] is True and fresh["stale"] is False and fresh["checked_at"].endswith("Z")
    assert (fresh["added"], fresh["modified"], fresh["removed"], fresh["sample_paths"]) == (0, 0, 0, [])


def test_added_modified_and_removed_notes_are_counted_and_named(vault):
    (vault / "a.md").write_text(note("Alpha", "The lighthouse keeper retired."), encoding="utf-8")
    (vault / "b.md").unlink()
    (vault / "d.md").write_text(note("Delta", "New."), encoding="utf-8")
    results = search_vault(vault, "lighthouse", 10, "fts", freshness=NOW)
    fresh = results.freshness
    assert fresh["stale"] is True and (fresh["added"], fresh["modified"], fresh["removed"]) == (1, 1, 1)
    assert fresh["sample_paths"] == ["a.md", "d.md", "b.md"]
    assert results.to_dict()["freshness"] == fresh


def test_a_touched_but_identical_note_is_not_stale(vault):
    st = (vault / "a.md").stat()
    os.utime(vault / "a.md", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert search_vault(vault, "lighthouse", 10, "fts", freshness=NOW).freshness["stale"] is False


def test_freshness_false_says_unchecked(vault):
    (vault / "b.md").unlink()
    fresh = search_vault(vault, "lighthouse", freshness=False).freshness
    assert (fresh["checked"], fresh["reason"], fresh["stale"]) == (False, "disabled", None)


def test_an_expensive_scan_is_reused_within_the_window_and_says_so(vault, monkeypatch):
    from core.index import freshness

    monkeypatch.setattr(freshness, "REUSE_MIN_WALK_SECONDS", 0.0)  # every walk counts as expensive
    slow = FreshnessOptions(window_seconds=3600.0)
    assert search_vault(vault, "lighthouse", freshness=slow).freshness["reused_scan"] is False
    (vault / "b.md").write_text(note("Beta", "The harbour master retired."), encoding="utf-8")  # in place
    again = search_vault(vault, "lighthouse", freshness=slow).freshness
    assert again["reused_scan"] is True and again["stale"] is False  # the window's cost trade-off, labelled
    assert search_vault(vault, "lighthouse", freshness=NOW).freshness["stale"] is True


def test_a_vault_over_the_budget_is_not_walked_and_says_so(vault):
    fresh = search_vault(vault, "lighthouse", freshness=FreshnessOptions(max_notes=2)).freshness
    assert (fresh["checked"], fresh["reason"], fresh["notes"], fresh["max_notes"]) == (False, "vault_too_large", 4, 2)


def test_changes_to_hidden_notes_leave_no_trace_for_a_restricted_caller(vault):
    (vault / "hidden/h.md").write_text(note("Hidden", "Changed.", classification="restricted"), encoding="utf-8")
    (vault / "hidden/new.md").write_text(note("New hidden", "x", classification="restricted"), encoding="utf-8")
    restricted = search_vault(vault, "lighthouse", freshness=NOW, classifications=["public"]).freshness
    assert restricted["stale"] is False and restricted["sample_paths"] == []
    everyone = search_vault(vault, "lighthouse", freshness=NOW).freshness
    assert (everyone["added"], everyone["modified"]) == (1, 1)


def test_cli_text_warns_in_one_line_when_stale_and_json_says_unchecked_with_no_freshness(vault, capsys):
    (vault / "c.md").unlink()
    assert cli.main(["search", str(vault), "lighthouse", "--mode", "fts"]) == 0
    first = capsys.readouterr().out.split("\n")[0]
    assert first.startswith("warning: STALE index: 0 added, 0 modified, 1 removed") and "c.md" in first
    assert cli.main(["search", str(vault), "lighthouse", "--mode", "fts", "--no-freshness", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["freshness"] == {"checked": False, "reason": "disabled", "stale": None}


def test_a_walk_past_its_time_budget_is_abandoned_and_says_so_without_retrying_at_once(vault):
    tight = FreshnessOptions(window_seconds=0.0, walk_budget_seconds=1e-9)
    fresh = search_vault(vault, "lighthouse", freshness=tight).freshness
    assert (fresh["checked"], fresh["reason"], fresh["stale"]) == (False, "walk_over_budget", None)
    assert fresh["walk_budget_seconds"] == 1e-9 and fresh["notes"] == 4 and fresh["source"] == "stat_walk"
    again = search_vault(vault, "lighthouse", freshness=tight).freshness  # the verdict is kept, not re-paid
    assert again["reason"] == "walk_over_budget" and 0 < again["retry_after_seconds"] <= 60
    assert search_vault(vault, "lighthouse", freshness=NOW).freshness["checked"] is True  # a walk under no budget


def test_there_is_no_note_count_cap_by_default_and_the_source_is_said(vault):
    fresh = search_vault(vault, "lighthouse", freshness=NOW).freshness
    assert FreshnessOptions().max_notes is None and fresh["source"] == "stat_walk" and fresh["reused_scan"] is False


def test_an_index_of_dot_paths_is_walked_with_its_own_rules(tmp_path: Path):
    root = write_vault(tmp_path / "v", {**FILES, ".drafts/d.md": note("Draft", "The lighthouse draft.")})
    build_index(root, changes={"include_dot_paths": True})
    fresh = search_vault(root, "lighthouse", freshness=NOW).freshness
    assert fresh["stale"] is False and fresh["removed"] == 0  # the dot note is indexed, not "removed"
    (root / ".drafts/d.md").unlink()
    assert search_vault(root, "lighthouse", freshness=NOW).freshness["sample_paths"] == [".drafts/d.md"]


def test_cli_text_says_when_freshness_could_not_be_checked_in_its_budget(vault, capsys):
    assert cli.main(["search", str(vault), "lighthouse", "--mode", "fts", "--freshness-budget", "1e-9"]) == 0
    first = capsys.readouterr().out.split("\n")[0]
    assert first.startswith("warning: index freshness NOT checked: the vault walk took longer than its 1e-09 s budget")
