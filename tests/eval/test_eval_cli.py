"""`vaultsearch eval`: formats, id matching through the real index, metrics, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import note

from core.cli import main
from core.errors import EvalInputError
from core.eval.cli import run_eval

FILES = {
    "db/postgres-pool.md": note("Postgres connection pool", "Tune the pgbouncer pool size for the API.", id="doc-pg"),
    "ops/incident-retro.md": note("Incident retro", "The outage came from an expired TLS certificate."),
    "people/onboarding.md": note("Onboarding", "Laptop setup, accounts and the first week."),
}
QUERIES = [
    {"_id": "q1", "text": "postgres pool size"},
    {"_id": "q2", "text": "expired certificate outage"},
    {"_id": "q3", "text": "laptop accounts first week"},
]


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


def write_inputs(tmp_path: Path, qrels_rows: list[tuple[str, str, int]]) -> tuple[Path, Path]:
    q = tmp_path / "queries.jsonl"
    q.write_text("".join(json.dumps(x) + "\n" for x in QUERIES), encoding="utf-8")
    r = tmp_path / "qrels.tsv"
    r.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{a}\t{b}\t{c}\n" for a, b, c in qrels_rows), encoding="utf-8"
    )
    return q, r


def test_ids_match_by_frontmatter_id_then_path_then_stem(vault, tmp_path):
    q, r = write_inputs(tmp_path, [("q1", "doc-pg", 1), ("q2", "ops/incident-retro.md", 1), ("q3", "onboarding", 1)])
    report = run_eval(vault, queries=q, qrels=r, modes=["fts", "hybrid"], k=10)
    assert report.id_matching.by_rule == {"id": 1, "path": 1, "stem": 1}
    for mode in report.modes:
        assert mode.ok and mode.n == 3
        assert mode.ndcg == pytest.approx(1.0) and mode.mrr == pytest.approx(1.0)  # each answer ranks first
        assert mode.recall == pytest.approx(1.0)


def test_an_unmatched_qrels_id_is_reported_not_dropped(vault, tmp_path, capsys):
    q, r = write_inputs(tmp_path, [("q1", "doc-pg", 1), ("q2", "no-such-note", 1), ("q3", "onboarding", 1)])
    assert main(["eval", str(vault), "--queries", str(q), "--qrels", str(r), "--mode", "fts", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unmatched_qrels_ids"] == ["no-such-note"]
    fts = out["modes"][0]
    assert fts["mode"] == "fts" and fts["n"] == 2  # q2 has no relevant note in the vault: excluded AND listed
    assert "q2" in json.dumps(out)


def test_failures_list_the_rank_reached(vault, tmp_path, capsys):
    # q3's label points at the postgres note, which a query about laptops does not rank first
    q, r = write_inputs(tmp_path, [("q1", "doc-pg", 1), ("q2", "ops/incident-retro.md", 1), ("q3", "doc-pg", 1)])
    assert (
        main(["eval", str(vault), "--queries", str(q), "--qrels", str(r), "--mode", "fts", "-k", "1", "--failures"])
        == 0
    )
    text = capsys.readouterr().out
    assert "nDCG@1" in text and "q3" in text


def test_bad_qrels_file_is_a_usage_error_with_the_line(vault, tmp_path, capsys):
    q, r = write_inputs(tmp_path, [])
    r.write_text("query-id\tcorpus-id\tscore\nq1\tdoc-pg\tnot-a-number\n", encoding="utf-8")
    with pytest.raises(EvalInputError) as info:
        run_eval(vault, queries=q, qrels=r, modes=["fts"])
    assert info.value.reason == "eval_input"
    assert main(["eval", str(vault), "--queries", str(q), "--qrels", str(r)]) == 2
    assert "eval_input" in capsys.readouterr().err
