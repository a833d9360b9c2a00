"""Leak probe: marker words that only hidden notes hold (secret / lan notes, and every malformed
frontmatter of tests/vault/test_classification.py), searched every way there is by a caller who
may see only ``public``: zero trace in hits, scores, counts, snippets, matched_text, graph
expansion, raw FTS5, metadata-only search, eval, status, the renderers and the CLI's JSON.

Where a comparison is possible the probe is exact: the restricted caller's answer equals the one
from the same vault without the hidden notes (only the index identity differs). Every probe runs on a
generation of one segment and on one of several segments with tombstones (issue 29)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.build.embed import embed_index
from core.cli import main
from core.eval.cli import run_eval
from core.index import verify
from core.index.layout import layout_for
from core.index.status import index_status
from core.render import format_search_results
from core.searcher import search_vault
from tests.conftest import note, write_files
from tests.minilm_fixture import FP32, PAIR, cached_model_dirs, fixture_root
from tests.vault.test_classification import MALFORMED
from tests.vault.test_classification import MARK as MALFORMED_MARK

MARK = "xanthoptera"
PUBLIC = ("public",)
VISIBLE = {
    "pub/a.md": note("Field log", "moth survey at dusk. See [[plans]] and [[b]].", classification="public"),
    "pub/b.md": note("Garden", "moth traps in the garden, survey notes", tags=["survey"]),
    "pub/c.md": note("Kitchen", "a plain note about soup", classification="public"),
}
HIDDEN = {
    "sec/plans.md": note(
        f"{MARK} plans",
        f"{MARK} moth survey budget; the {MARK} grant. See [[c]].",
        classification="secret",
        tags=[MARK, "survey"],
        supersedes="[[b]]",
    ),
    "lan/r.md": note(f"Relay {MARK}", f"{MARK}-relay moth survey wiring", classification="lan", aliases=[MARK]),
    **{
        f"bad/{case}.md": text.replace(MALFORMED_MARK, f"{MALFORMED_MARK} moth survey")
        for case, text in MALFORMED.items()
    },
}
TRACES = (MARK, MARK.capitalize(), MALFORMED_MARK, "sec/", "lan/", "bad/", "plans.md", "Relay")
LEXICAL = ("fts", "vector", "hybrid", "graph_assisted", "auto")
DENSE = ("semantic", "reranked", "auto")
PROBES = [MARK, f"{MARK} plans", f"{MARK}-relay", MALFORMED_MARK, "moth survey", "survey budget grant", ""]
RAW_PROBES = [MARK, f"{MARK}*", "xanth*", f"title:{MARK}", f"tags:{MARK}", f"NEAR({MARK} plans)", "moth OR budget"]


def traces(obj: object) -> list[str]:
    dump = json.dumps(obj, ensure_ascii=False, default=str) if not isinstance(obj, str) else obj
    return [t for t in TRACES if t in dump]


def seen(results) -> dict:
    """The answer minus the echoed query (the caller's own text, also as analysed terms) and the index identity."""
    d = results.to_dict()
    d.pop("query"), d.pop("query_terms"), d.pop("index")
    assert set(d.pop("unmatched_words")) <= set(re.findall(r"[^\W_]+", results.query.lower()))  # its own words
    for key in ("checked_at", "scan_age_seconds", "reused_scan"):  # when it looked, not what it saw
        d["freshness"].pop(key, None)
    for r in d["results"]:
        for key in ("index_age_seconds", "index_generation_id", "index_source_snapshot_hash"):
            r.pop(key)
        # where the copy lies and when its files were written (two vaults made one after the other)
        r.pop("obsidian_uri")
        r["dates"].pop("mtime")
        if r["date_field"] == "mtime":
            r.pop("date")
    return d


# the same edits to both vaults after their first build: each publishes a delta segment and a tombstone, so the
# probe also runs on a generation of several segments (issue 29: the view's dead rows are a class no caller sees)
EDITS = (("pub/a.md", "\nA second dusk survey.\n"), ("pub/c.md", "\nSoup again, with moth beans.\n"))


@pytest.fixture(scope="module", params=["one segment", "segments"])
def vaults(request, tmp_path_factory) -> tuple[Path, Path, dict]:
    """(vault with the hidden notes, the same vault without them, rerank options), both embedded; one segment
    each, or several (the same notes edited after the first build)."""
    dirs = cached_model_dirs(fixture_root(request, tmp_path_factory))
    full = write_files(tmp_path_factory.mktemp("leak"), {**VISIBLE, **HIDDEN})
    bare = write_files(tmp_path_factory.mktemp("bare"), VISIBLE)
    for vault in (full, bare):
        build_index(vault)
        embed_index(vault, model=dirs[FP32])
        for rel, text in EDITS if request.param == "segments" else ():
            with (vault / rel).open("a", encoding="utf-8") as fh:
                fh.write(text)
            build_index(vault)
            embed_index(vault, model=dirs[FP32])
        parts = verify.resolve(layout_for(vault)).parts
        assert (sum(p.kind == "segment" for p in parts) >= 3) == (request.param == "segments")
    return full, bare, {"reranker": str(dirs[PAIR])}


def test_control_the_markers_are_found_without_a_restriction(vaults):
    full, _, _ = vaults
    assert traces(search_vault(full, MARK, mode="fts").to_dict())
    assert traces(search_vault(full, MALFORMED_MARK, mode="fts").to_dict())


@pytest.mark.parametrize("mode", sorted({*LEXICAL, *DENSE}))
@pytest.mark.parametrize("query", PROBES)
def test_every_mode_leaves_no_trace_and_equals_the_vault_without_hidden_notes(vaults, mode, query):
    full, bare, options = vaults
    got = search_vault(full, query, mode=mode, limit=50, classifications=PUBLIC, options=options)
    assert not traces(seen(got))
    assert seen(got) == seen(search_vault(bare, query, mode=mode, limit=50, classifications=PUBLIC, options=options))


@pytest.mark.parametrize("query", RAW_PROBES)
def test_raw_fts5_leaves_no_trace(vaults, query):
    full, bare, _ = vaults
    got = search_vault(full, query, mode="fts", raw=True, limit=50, classifications=PUBLIC)
    assert not traces(seen(got))
    assert seen(got) == seen(search_vault(bare, query, mode="fts", raw=True, limit=50, classifications=PUBLIC))


@pytest.mark.parametrize(
    "filters", [{"tags_any": [MARK]}, {"tags_all": ["survey"]}, {"path_prefixes": ["sec/", "bad/"]}, {}]
)
@pytest.mark.parametrize("query", ["", "moth"])
def test_metadata_only_and_filtered_searches_leave_no_trace(vaults, filters, query):
    full, bare, _ = vaults
    got = search_vault(full, query, mode="fts", limit=50, classifications=PUBLIC, **filters)
    assert not traces(seen(got))
    assert seen(got) == seen(search_vault(bare, query, mode="fts", limit=50, classifications=PUBLIC, **filters))


def test_graph_expansion_from_a_visible_note_never_reaches_a_hidden_one(vaults):
    full, _, _ = vaults
    got = search_vault(full, "moth survey dusk", mode="graph_assisted", limit=50, classifications=PUBLIC)
    assert {r.rel_path for r in got} <= set(VISIBLE)
    assert all(r.via is None or r.via["from"] in VISIBLE for r in got)


def test_a_hidden_note_does_not_supersede_a_visible_one(vaults):
    full, _, _ = vaults
    assert "pub/b.md" in {r.rel_path for r in search_vault(full, "garden", mode="fts", classifications=PUBLIC)}


@pytest.mark.parametrize("mode", ["fts", "graph_assisted", "semantic"])
def test_renderers_leave_no_trace(vaults, mode):
    full, _, _ = vaults
    got = search_vault(full, "moth survey", mode=mode, classifications=PUBLIC)
    for text in (format_search_results(got, "moth survey", mode), got._repr_html_(), got._repr_markdown_()):
        assert not traces(text)


def _eval_files(tmp_path: Path) -> tuple[Path, Path]:
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in [("q1", "moth survey"), ("q2", "soup")]),
        encoding="utf-8",
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\tpub/c.md\t1\nq2\tpub/c.md\t1\n", encoding="utf-8")
    return queries, qrels


def _eval_seen(report) -> dict:
    d = report.to_dict()
    for m in d["modes"]:
        m.pop("latency_p50_ms"), m.pop("latency_p95_ms")
    return d


def test_eval_with_failures_leaves_no_trace(vaults, tmp_path):
    full, bare, _ = vaults
    queries, qrels = _eval_files(tmp_path)
    kw = dict(queries=queries, qrels=qrels, modes=list(LEXICAL), k=1, failures=True, classifications=PUBLIC)
    got = run_eval(full, **kw)
    assert any(m["failures"] for m in got.to_dict()["modes"])  # the control: failures are listed
    assert not traces(got.to_dict()) and not traces(got.format_failures())
    assert _eval_seen(got) == _eval_seen(run_eval(bare, **kw))


def _status_seen(status: dict) -> dict:
    for key in (
        "vault",
        "index_dir",
        "generation_id",
        "sha256",
        "size",
        "source_snapshot_hash",
        "age_seconds",
        "parts",
    ):
        status.pop(key)
    status.pop("generations")
    for key in ("chunks_per_s", "seconds_left", "estimate"):  # how fast this machine embedded: a timing
        status["dense"].pop(key, None)
    return status


def test_status_leaves_no_trace(vaults):
    full, bare, _ = vaults
    unrestricted = index_status(full)
    assert traces(unrestricted["problems"])  # the control: malformed notes are listed as problems
    got = index_status(full, classifications=PUBLIC)
    assert not traces(got)
    assert _status_seen(got) == _status_seen(index_status(bare, classifications=PUBLIC))


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("mode", LEXICAL)
def test_cli_json_and_text_output_leave_no_trace(vaults, mode, tmp_path):
    full, _, _ = vaults
    for fmt in (["--json"], []):
        code, out, err = _cli("search", str(full), "moth survey", "--mode", mode, "--classification", "public", *fmt)
        assert code == 0 and not traces(out) and not traces(err)
    code, out, _ = _cli("status", str(full), "--classification", "public", "--json")
    assert code == 0 and not traces(out)
    queries, qrels = _eval_files(tmp_path)
    code, out, _ = _cli(
        "eval", str(full), "--queries", str(queries), "--qrels", str(qrels), "--mode", mode, "-k", "1", "--failures",
        "--classification", "public", "--json",
    )  # fmt: skip
    assert code == 0 and not traces(out)
