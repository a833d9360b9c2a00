"""`eval` and `status` take the same visibility options as `search`; eval reports what really ran
(``auto`` falling back to fts) per mode and per failed query; the default visibility is stated."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from core.cli import build_parser, main
from core.eval.cli import run_eval
from core.index.status import index_status
from tests.conftest import note

FILES = {
    "pub/pool.md": note("Postgres pool", "tune the pgbouncer pool size", classification="public"),
    "pub/retro.md": note("Incident retro", "the outage came from an expired certificate"),
    "sec/plan.md": note("Pool budget", "secret pool size budget and the pgbouncer plan", classification="secret"),
}
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES, name="evalvis")


@pytest.fixture
def inputs(tmp_path) -> tuple[Path, Path]:
    q = tmp_path / "q.jsonl"
    q.write_text(
        json.dumps({"_id": "q1", "text": "pgbouncer pool size"}) + "\n" + json.dumps({"_id": "q2", "text": "outage"}),
        encoding="utf-8",
    )
    r = tmp_path / "qrels.tsv"
    r.write_text("query-id\tcorpus-id\tscore\nq1\tpub/retro.md\t1\nq2\tpub/retro.md\t1\n", encoding="utf-8")
    return q, r


def test_eval_auto_reports_the_actual_mode_and_fallback_reason(vault, inputs):
    q, r = inputs
    report = run_eval(vault, queries=q, qrels=r, modes=["auto", "fts"], k=1, failures=True)
    auto, fts = report.modes
    assert auto.actual_modes == {"fts": 2} and auto.fallback_reasons == {"dense_index_unavailable": 2}
    assert fts.actual_modes == {"fts": 2} and fts.fallback_reasons == {}
    (failure,) = auto.failures
    assert (failure.query_id, failure.actual_mode, failure.fallback_reason) == ("q1", "fts", "dense_index_unavailable")
    assert "auto: ran fts x2; fallback dense_index_unavailable x2" in report.format_table()
    assert "(ran fts, fallback dense_index_unavailable)" in report.format_failures()
    d = report.to_dict()["modes"][0]
    assert d["actual_modes"] == {"fts": 2} and d["failures"][0]["fallback_reason"] == "dense_index_unavailable"


def test_eval_failures_never_show_a_note_outside_the_callers_classifications(vault, tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"_id": "q1", "text": "tune the pgbouncer"}), encoding="utf-8")
    r = tmp_path / "qrels.tsv"  # "plan" names sec/plan.md by its stem
    r.write_text("query-id\tcorpus-id\tscore\nq1\tplan\t1\nq1\tpub/retro.md\t1\n", encoding="utf-8")
    everyone = run_eval(vault, queries=q, qrels=r, modes=["fts"], k=1, failures=True)
    assert "sec/plan.md" in json.dumps(everyone.to_dict())  # the control: the default sees every note
    public = run_eval(vault, queries=q, qrels=r, modes=["fts"], k=1, failures=True, classifications=["public"])
    assert "sec/plan.md" not in json.dumps(public.to_dict()) + public.format_failures() + public.format_table()


def test_status_counts_only_visible_notes(vault):
    assert index_status(vault)["notes"] == 3
    assert index_status(vault)["visibility"]["restricted"] is False
    public = index_status(vault, classifications=["PUBLIC"])
    assert public["notes"] == 2 and public["visibility"]["classifications"] == ["public"]


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_cli_eval_and_status_take_classification(vault, inputs):
    q, r = inputs
    code, out = _run("eval", str(vault), "--queries", str(q), "--qrels", str(r), "-k", "1", "--failures",
                     "--classification", "public", "--json")  # fmt: skip
    assert code == 0 and "sec/plan.md" not in out
    code, out = _run("status", str(vault), "--classification", "public", "--json")
    assert code == 0 and json.loads(out)["notes"] == 2
    code, out = _run("status", str(vault))
    assert code == 0 and "visibility every note (no --classification given: secret ones included)" in out


@pytest.mark.parametrize("command", ["search", "status", "eval"])
def test_default_visibility_is_documented_in_help(command):
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    assert "every note is visible, secret ones included" in " ".join(sub.format_help().split())


def test_default_visibility_is_documented_in_the_readme():
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "every note is visible, secret ones included" in text and "--classification" in text
