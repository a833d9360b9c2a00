"""The `vaultsearch` CLI, called in-process through core.cli.main (plus one real subprocess)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import note

from core import cli
from core import generations as gen
from core.registry import DEPRECATED_ALIASES, MODE_NAMES, markdown_table, modes_json
from core.searcher import SearchResult

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {"index", "search", "status", "verify", "modes", "eval"}
RESULT_FIELDS = {f.name for f in dataclasses.fields(SearchResult)}
INDEX_KEYS = {"generation_id", "notes", "chunks", "reused", "changed", "removed", "problems", "seconds"}
FILES = {
    "a.md": note("Harbour lighthouse", "The lighthouse keeper logs every ship.", type="howto", tags=["sea"]),
    "b.md": note(
        "Bakery", "Sourdough loaves and a lighthouse-shaped cake.", type="recipe", classification="restricted"
    ),
    "c/d.md": note("Dock", "Ships dock at the pier.", type="howto"),
}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_is_in_the_parser_and_has_help(capsys):
    subs = _subcommands()
    assert COMMANDS <= set(subs)  # the SPEC commands; every command present is checked below
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    top = capsys.readouterr().out
    for name, parser in subs.items():
        assert name in top and parser.description
        with pytest.raises(SystemExit) as info:
            cli.main([name, "--help"])
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: vaultsearch {name}") and "--json" in out


def test_search_mode_choices_come_from_the_registry():
    mode = next(a for a in _subcommands()["search"]._actions if a.dest == "mode")
    assert mode.choices is None and mode.metavar == "{" + ",".join(MODE_NAMES) + "}"  # aliases: accepted, unlisted
    assert all(mode.type(name) == name for name in [*MODE_NAMES, *DEPRECATED_ALIASES])
    eval_mode = next(a for a in _subcommands()["eval"]._actions if a.dest == "mode")
    assert list(eval_mode.choices) == list(MODE_NAMES)


def test_modes_markdown_prints_the_generated_table_that_the_docs_hold(capsys):
    code, out, _ = run(capsys, "modes", "--markdown")
    assert code == 0 and out == markdown_table()
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"<!-- modes:start -->\n{out}<!-- modes:end -->" in doc


def test_modes_json_and_plain_listing(capsys):
    assert run_json(capsys, "modes") == modes_json()
    code, out, _ = run(capsys, "modes")
    listed = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and listed == list(MODE_NAMES) and "hybrid_reranked" not in out


def test_index_json_report_and_an_up_to_date_rerun(capsys, make_vault):
    root = make_vault(FILES, build=False, name="cli-index")
    report = run_json(capsys, "index", str(root))
    assert INDEX_KEYS <= set(report)
    assert (report["notes"], report["changed"], report["reused"], report["removed"]) == (3, 3, 0, 0)
    assert report["chunks"] >= 3 and report["problems"] == [] and report["seconds"] >= 0
    assert report["generation_id"] == gen.active_record(gen.layout_for(root))["generation_id"]
    again = run_json(capsys, "index", str(root))
    assert (again["generation_id"], again["reused"], again["changed"]) == (report["generation_id"], 3, 0)
    (root / "a.md").unlink()
    third = run_json(capsys, "index", str(root))
    assert (third["notes"], third["removed"]) == (2, 1) and third["generation_id"] != report["generation_id"]


def test_index_text_output(capsys, make_vault):
    root = make_vault(FILES, build=False, name="cli-text")
    code, out, _ = run(capsys, "index", str(root))
    assert code == 0 and out.startswith("published g") and "3 notes" in out


def test_search_json_output_keys(capsys, vault):
    d = run_json(capsys, "search", str(vault), "lighthouse")
    assert set(d) == {
        "query",
        "query_expansions",
        "unmatched_words",
        "requested_mode",
        "query_terms",
        "actual_mode",
        "retrieval_contract",
        "fallback_reason",
        "index",
        "freshness",
        "results",
    }
    assert (d["query"], d["requested_mode"], d["actual_mode"], d["retrieval_contract"], d["fallback_reason"]) == (
        "lighthouse",
        "auto",
        "fts",
        "fts_fallback",
        "dense_index_unavailable",
    )
    assert set(d["index"]) == {"kind", "generation_id", "source_snapshot_hash", "watermark", "age_seconds"}
    active = gen.active_record(gen.layout_for(vault))
    assert d["index"]["kind"] == "immutable_generation" and d["index"]["generation_id"] == active["generation_id"]
    assert d["index"]["source_snapshot_hash"] == active["source_snapshot_hash"]
    assert d["results"] and all(set(r) == RESULT_FIELDS for r in d["results"])
    assert d["results"][0]["rel_path"] == "a.md"


@pytest.mark.parametrize("mode", ["fts", "vector", "hybrid", "graph_assisted"])
def test_search_modes_and_filters_through_the_cli(capsys, vault, mode):
    d = run_json(capsys, "search", str(vault), "lighthouse ships", "--mode", mode, "-n", "5", "--type", "howto")
    assert d["actual_mode"] == mode and {r["rel_path"] for r in d["results"]} <= {"a.md", "c/d.md"}
    d = run_json(capsys, "search", str(vault), "lighthouse", "--mode", mode, "--classification", "public")
    assert "b.md" not in {r["rel_path"] for r in d["results"]}
    d = run_json(capsys, "search", str(vault), "ships", "--mode", mode, "--path", "c/")
    assert [r["rel_path"] for r in d["results"]] == ["c/d.md"]


def test_search_text_output_says_what_ran(capsys, vault):
    code, out, _ = run(capsys, "search", str(vault), "lighthouse", "-n", "2")
    assert code == 0 and "mode fts (requested auto" in out and "a.md" in out
    assert "FALLBACK" not in out and out.rstrip().splitlines()[-1].startswith("hint: semantic search is off")


@pytest.mark.parametrize("mode", ["semantic", "reranked"])
def test_failing_closed_exits_5_with_the_reason_on_stderr(capsys, vault, mode):
    code, out, err = run(capsys, "search", str(vault), "lighthouse", "--mode", mode)
    assert code == 5 and out == "" and "[dense_index_unavailable]" in err and "hint:" in err
    code, out, err = run(capsys, "search", str(vault), "lighthouse", "--mode", mode, "--json")
    assert code == 5 and out == "" and json.loads(err)["reason"] == "dense_index_unavailable"
    d = run_json(capsys, "search", str(vault), "lighthouse", "--mode", mode, "--allow-fallback")
    assert (d["requested_mode"], d["actual_mode"], d["retrieval_contract"], d["fallback_reason"]) == (
        mode,
        "fts",
        "fts_fallback",
        "dense_index_unavailable",
    )


def test_deprecated_alias_is_accepted_by_the_cli(capsys, vault):
    with pytest.warns(DeprecationWarning):
        d = run_json(capsys, "search", str(vault), "lighthouse", "--mode", "hybrid_reranked", "--allow-fallback")
    assert d["retrieval_contract"] == "fts_fallback"


@pytest.mark.parametrize(
    ("query", "argv", "reason"),
    [
        ("title:", ["--raw"], "query_syntax"),
        ("lighthouse", ["--date-field", "published", "--since", "2024-01-01"], "invalid_filter"),
        ("lighthouse", ["--since", "not-a-date"], "invalid_filter"),
        ("lighthouse", ["--mode", "vector", "--raw"], "usage"),
    ],
)
def test_usage_errors_exit_2_with_their_reason(capsys, vault, query, argv, reason):
    code, out, err = run(capsys, "search", str(vault), query, *argv, "--json")
    assert code == 2 and out == "" and json.loads(err)["reason"] == reason
    code, out, err = run(capsys, "search", str(vault), query, *argv)
    assert code == 2 and out == "" and f"[{reason}]" in err


def test_unknown_mode_is_an_argparse_usage_error(capsys, vault):
    with pytest.raises(SystemExit) as info:
        cli.main(["search", str(vault), "x", "--mode", "bm42"])
    assert info.value.code == 2 and "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["search", "{v}", "lighthouse"],
        ["search", "{v}", "x", "--mode", "semantic"],
        ["status", "{v}"],
        ["verify", "{v}"],
    ],
)
def test_no_index_exits_3(capsys, make_vault, command):
    bare = make_vault(FILES, build=False, name="cli-bare")
    code, out, err = run(capsys, *[a.format(v=bare) for a in command])
    assert code == 3 and out == "" and "[index_missing]" in err and "vaultsearch index" in err


def test_status_json_and_staleness_check(capsys, make_vault):
    root = make_vault(FILES, name="cli-status")
    s = run_json(capsys, "status", str(root))
    assert {
        "vault",
        "index_kind",
        "generation_id",
        "age_seconds",
        "notes",
        "chunks",
        "coverage",
        "problems",
        "staleness",
        "generations",
        "dense",
    } <= set(s)
    assert (s["index_kind"], s["notes"], s["staleness"]["stale"]) == ("immutable_generation", 3, False)
    assert s["coverage"] == {"indexed_notes": 3, "source_files": 3}
    assert [g["generation_id"] for g in s["generations"] if g["active"]] == [s["generation_id"]]
    assert run(capsys, "status", str(root), "--check")[0] == 0
    (root / "new.md").write_text(note("New", "fresh"), encoding="utf-8")
    code, out, _ = run(capsys, "status", str(root), "--check", "--json")
    assert code == cli.EXIT_STALE and json.loads(out)["staleness"]["added"] == ["new.md"]
    code, out, _ = run(capsys, "status", str(root))
    assert code == 0 and "stale      YES" in out


def test_verify_good_then_tampered(capsys, make_vault):
    root = make_vault(FILES, name="cli-verify")
    report = run_json(capsys, "verify", str(root))
    active = gen.active_record(gen.layout_for(root))
    assert (report["kind"], report["generation_id"], report["sha256"]) == (
        "immutable_generation",
        active["generation_id"],
        active["sha256"],
    )
    [part] = report["parts"]
    assert part["kind"] == "segment" and Path(part["path"]).name == f"{part['sha256']}.seg"
    code, out, _ = run(capsys, "verify", str(root))
    assert code == 0 and out.startswith("ok: generation") and part["path"] in out  # each part is listed
    path = Path(part["path"])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different bytes
    path.write_bytes(bytes(data))
    code, out, err = run(capsys, "verify", str(root))
    assert code == 4 and out == "" and "[sha256_mismatch]" in err and part["path"] in err
    code, _, err = run(capsys, "verify", str(root), "--json")
    evidence = json.loads(err)["evidence"]
    assert json.loads(err)["reason"] == "sha256_mismatch" and evidence["expected"] == part["sha256"]
    assert evidence["path"] == part["path"] and evidence["actual"] != part["sha256"]
    code, out, err = run(capsys, "search", str(root), "lighthouse", "--mode", "fts")
    assert code == 4 and out == "" and "[sha256_mismatch]" in err  # never served, never a fallback


def test_in_place_index_is_served_as_legacy_db(capsys, make_vault):
    root = make_vault(FILES, build=False, name="cli-legacy")
    report = run_json(capsys, "index", str(root), "--in-place")
    assert report["index_kind"] == "legacy_db" and report["generation_id"] is None
    d = run_json(capsys, "search", str(root), "lighthouse", "--mode", "fts")
    assert d["index"]["kind"] == "legacy_db" and d["index"]["generation_id"] is None
    assert d["results"] and all(r["index_kind"] == "legacy_db" for r in d["results"])
    assert run_json(capsys, "verify", str(root))["kind"] == "legacy_db"


def test_index_dir_from_the_environment(capsys, make_vault, tmp_path, monkeypatch):
    root = make_vault(FILES, build=False, name="cli-env")
    elsewhere = tmp_path / "idx"
    assert run_json(capsys, "index", str(root), "--index-dir", str(elsewhere))["notes"] == 3
    assert not (root / ".vaultsearch").exists()
    assert run(capsys, "search", str(root), "lighthouse")[0] == 3  # not where the env does not point
    monkeypatch.setenv("VAULTSEARCH_INDEX_DIR", str(elsewhere))
    assert run_json(capsys, "search", str(root), "lighthouse")["results"][0]["rel_path"] == "a.md"


def test_the_installed_command_runs_end_to_end(make_vault):
    """One real process: the console script when installed, else `python -m core.cli`."""
    root = make_vault(FILES, build=False, name="cli-proc")
    script = ROOT / ".venv" / "bin" / "vaultsearch"
    base = [str(script)] if script.exists() else [sys.executable, "-m", "core.cli"]
    env = {k: v for k, v in os.environ.items() if k != "VAULTSEARCH_INDEX_DIR"}
    done = subprocess.run(
        [*base, "index", str(root), "--json"], capture_output=True, text=True, cwd=ROOT, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["notes"] == 3
    done = subprocess.run(
        [*base, "search", str(root), "lighthouse", "--mode", "semantic"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 5 and "[dense_index_unavailable]" in done.stderr
    done = subprocess.run(
        [*base, "search", str(root), "lighthouse", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["results"][0]["rel_path"] == "a.md"


def test_index_language_is_the_vault_default_and_part_of_the_identity(capsys, make_vault):
    root = make_vault({"a.md": note("A", "x = 1")}, build=False, name="cli-lang")
    assert run_json(capsys, "index", str(root), "--language", "de")["full_rebuild_reason"] == "no_active_generation"
    assert run_json(capsys, "index", str(root), "--language", "de")["up_to_date"]
    assert run_json(capsys, "index", str(root))["up_to_date"]  # the language is a stored setting (issue #16)
    assert run_json(capsys, "index", str(root), "--language", "en")["full_rebuild_reason"] == "index_identity_changed"
    code, _, err = run(capsys, "index", str(root), "--language", "klingon")
    assert code == 2 and "usage" in err


def test_version_prints_the_installed_distributions_version(capsys):
    """``vaultsearch --version`` (issue 27): the version of the installed distribution, exit 0."""
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"vaultsearch {version('vaultsearch')}"
