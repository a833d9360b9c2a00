"""The soak's bookkeeping (bench/soak_serve.py) on tiny inputs: what counts as failed, what as
wrong (a deleted note served as fresh), the writer's ledger and the RSS summary. No server runs
here; the soak itself is a benchmark (``python -m bench.soak_serve``)."""

from __future__ import annotations

import random
from pathlib import Path

from bench.soak_serve import Ledger, Tally, Writer, judge, marker, rss_summary


def _ledger() -> Ledger:
    ledger = Ledger()
    ledger.created("soak/a.md", 10.0)
    ledger.gone("soak/a.md", 20.0)
    ledger.created("soak/b.md", 15.0)
    return ledger


def _search(paths: list[str], stale: bool | None) -> dict:
    return {"ok": {"hits": [{"path": p} for p in paths], "freshness": {"stale": stale}}}


def test_a_hit_for_a_note_deleted_before_the_request_is_wrong_only_when_said_fresh() -> None:
    ledger = _ledger()
    assert judge("search", "q", 25.0, _search(["soak/a.md"], False), ledger)[0] == "wrong"
    assert judge("search", "q", 25.0, _search(["soak/a.md"], True), ledger)[0] == "ok"  # labelled stale
    assert judge("search", "q", 19.0, _search(["soak/a.md"], False), ledger)[0] == "ok"  # sent before the delete
    assert judge("search", "q", 25.0, _search(["soak/b.md", "corpus.md"], False), ledger)[0] == "ok"


def test_read_note_of_a_deleted_note_must_be_a_typed_not_found() -> None:
    ledger = _ledger()
    assert judge("read_note", "soak/a.md", 25.0, {"ok": {"text": "x"}}, ledger)[0] == "wrong"
    assert judge("read_note", "soak/a.md", 25.0, {"error": {"reason": "note_not_found"}}, ledger)[0] == "ok"
    assert judge("read_note", "corpus.md", 25.0, {"error": {"reason": "note_not_found"}}, ledger)[0] == "failed"
    assert judge("search", "q", 25.0, {"error": {"reason": "index_busy"}}, ledger)[0] == "failed"
    assert judge("search", "q", 25.0, {"exception": "ReadTimeout"}, ledger)[0] == "failed"


def test_the_tally_counts_each_verdict() -> None:
    tally = Tally()
    tally.record("http", "search", ("ok", ""), 0.01)
    tally.record("http", "search", ("failed", "search: error index_busy"), 0.02)
    tally.record("mcp", "read_note", ("wrong", "read_note served x"), 0.03)
    got = tally.summary()
    assert (got["total_requests"], got["failed"], got["wrong"]) == (3, 1, 1)
    assert got["requests"] == {"http.search": 2, "mcp.read_note": 1}
    assert got["failures"] == {"http search: error index_busy": 1}


def test_the_writer_records_every_operation_in_every_copy(tmp_path: Path) -> None:
    vaults = [tmp_path / "a", tmp_path / "b"]
    for v in vaults:
        v.mkdir()
        (v / "c.md").write_text("# c\n", encoding="utf-8")
    ledgers = [Ledger(), Ledger()]
    writer = Writer(vaults, ledgers, ["c.md"], seed=1)
    writer.add()
    writer.add()
    writer.rename()
    writer.delete()
    writer.edit()
    assert writer.errors == []
    for v, ledger in zip(vaults, ledgers):
        names = sorted(str(p.relative_to(v)) for p in v.rglob("*.md"))
        assert names == sorted(["c.md", *(p for p, _ in writer.live)])
        for path, _ in writer.dead:
            assert ledger.gone_before(path, 1e12) is not None
        for path, _ in writer.live:
            assert ledger.gone_before(path, 1e12) is None
    tool, arg = writer.pick(random.Random(0), ["word"])
    assert tool in ("search", "read_note") and arg
    assert marker(3) == "soakmark3q"


def test_the_rss_summary_is_first_max_last_per_server() -> None:
    curve = [{"t": 5, "serve_1": 100.0, "mcp_2": 50.0}, {"t": 10, "serve_1": 140.0}, {"t": 15, "serve_1": 120.0}]
    assert rss_summary(curve) == {
        "mcp_2": {"first": 50.0, "max": 50.0, "last": 50.0},
        "serve_1": {"first": 100.0, "max": 140.0, "last": 120.0},
    }
