"""core.eval.evaluation: loading BEIR files, matching qrels ids to notes, and evaluate()."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from core.errors import DenseIndexUnavailableError, EvalInputError, UsageError
from core.eval.evaluation import evaluate
from core.eval.inputs import load_qrels, load_queries
from core.eval.matching import DocIdMatcher
from tests import paths

DATA = paths.DATA
LOG2_3 = math.log2(3)


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _vault_notes(root: Path) -> list[tuple[str, str | None]]:
    """(rel_path, frontmatter id) for every note, reading `id:` from the frontmatter with a regex
    (the notes parser is not under test here)."""
    notes = []
    for path in sorted(root.rglob("*.md")):
        head = path.read_text(encoding="utf-8", errors="replace")[:2000]
        fm = re.match(r"---\n(.*?)\n---", head, re.S)
        found = re.search(r'^id:\s*"?([^"\n]+?)"?\s*$', fm.group(1), re.M) if fm else None
        notes.append((path.relative_to(root).as_posix(), found.group(1) if found else None))
    return notes


# ----------------------------------------------------------------------------- real files


def test_scifact_dev_files_load_and_match_by_frontmatter_id():
    queries = load_queries(DATA / "scifact/dev_queries.jsonl")
    qrels = load_qrels(DATA / "scifact/dev_qrels.tsv")
    assert len(queries) == 150
    assert sum(len(v) for v in qrels.values()) == 167
    assert set(qrels) == set(queries)
    assert all(rel == 1 for judged in qrels.values() for rel in judged.values())
    summary = DocIdMatcher(_vault_notes(DATA / "scifact/vault")).summarize(
        d for judged in qrels.values() for d in judged
    )
    assert summary.unmatched_qrels_ids == ()
    assert summary.by_rule["id"] == summary.total > 0


@pytest.mark.parametrize("name, vault", [("dendron", "dendron/vault"), ("powershell", "powershell-docs/reference")])
def test_known_item_files_load_and_match_by_path(name, vault):
    queries = load_queries(DATA / f"known-item/{name}_dev_queries.jsonl")
    qrels = load_qrels(DATA / f"known-item/{name}_dev_qrels.tsv")
    assert len(queries) == len(qrels) == 100
    assert all(len(judged) == 1 for judged in qrels.values())
    notes = _vault_notes(DATA / vault)  # Dendron notes carry frontmatter ids too; the qrels use paths
    docids = {d for judged in qrels.values() for d in judged}
    summary = DocIdMatcher(notes).summarize(sorted(docids))
    assert summary.unmatched_qrels_ids == ()
    assert summary.by_rule == {"id": 0, "path": len(docids), "stem": 0}


def test_queries_ignore_extra_keys_and_read_integer_ids(tmp_path):
    path = _write(tmp_path, "q.jsonl", '{"_id": "a", "text": "one", "metadata": {}}\n\n{"_id": 7, "text": "two"}\n')
    assert load_queries(path) == {"a": "one", "7": "two"}


def test_line_numbers_count_newlines_only(tmp_path):
    # U+2028 is a line break to str.splitlines() but valid raw inside a JSON string
    path = _write(tmp_path, "q.jsonl", '{"_id": "1", "text": "a\u2028b"}\r\n{"_id": "2", "text": }\n')
    with pytest.raises(EvalInputError) as exc:
        load_queries(path)
    assert exc.value.evidence["line"] == 2


def test_qrels_keep_grades_and_paths_with_spaces(tmp_path):
    path = _write(tmp_path, "r.tsv", "query-id\tcorpus-id\tscore\nq1\tmy notes/a b.md\t2\nq1\tz\t0\nq2\tz\t-1\n")
    assert load_qrels(path) == {"q1": {"my notes/a b.md": 2, "z": 0}, "q2": {"z": -1}}


# ----------------------------------------------------------------------------- bad input


def _assert_input_error(exc: pytest.ExceptionInfo, path: Path, line: int | None) -> None:
    assert exc.value.reason == "eval_input"
    assert exc.value.evidence["path"] == str(path)
    assert exc.value.evidence["line"] == line
    assert str(path) in exc.value.message  # the file is named for the user, not only in evidence


GOOD_Q = '{"_id": "1", "text": "ok"}\n'


@pytest.mark.parametrize(
    "content, line",
    [
        (GOOD_Q + GOOD_Q.replace("1", "2") + '{"_id": "3", "text": \n', 3),  # bad JSON on line 3
        (GOOD_Q + '["not", "an", "object"]\n', 2),
        (GOOD_Q + '{"text": "no id"}\n', 2),
        (GOOD_Q + '{"_id": "", "text": "empty id"}\n', 2),
        (GOOD_Q + '{"_id": "2"}\n', 2),  # missing text
        (GOOD_Q + '{"_id": "2", "text": 5}\n', 2),
        (GOOD_Q + GOOD_Q, 2),  # duplicate _id
        ("", None),
        ("\n  \n", None),
    ],
)
def test_bad_queries_raise_with_file_and_line(tmp_path, content, line):
    path = _write(tmp_path, "q.jsonl", content)
    with pytest.raises(EvalInputError) as exc:
        load_queries(path)
    _assert_input_error(exc, path, line)


def test_invalid_utf8_names_the_line(tmp_path):
    path = _write(tmp_path, "q.jsonl", GOOD_Q.encode() + b'{"_id": "2", "text": "\xff"}\n')
    with pytest.raises(EvalInputError) as exc:
        load_queries(path)
    _assert_input_error(exc, path, 2)


@pytest.mark.parametrize("loader", [load_queries, load_qrels])
def test_missing_file(tmp_path, loader):
    path = tmp_path / "absent.txt"
    with pytest.raises(EvalInputError) as exc:
        loader(path)
    _assert_input_error(exc, path, None)


HEADER = "query-id\tcorpus-id\tscore\n"


@pytest.mark.parametrize(
    "content, line",
    [
        ("q1\td1\t1\n", 1),  # no header
        ("query-id corpus-id score\nq1\td1\t1\n", 1),  # header not tab-separated
        (HEADER + "q1\td1\t1\nq1\td2\n", 3),  # missing column
        (HEADER + "q1\td1\t1\t0\n", 2),  # extra column (TREC 4-column format)
        (HEADER + "q1\td1\t1.5\n", 2),  # non-integer score
        (HEADER + "q1\td1\thigh\n", 2),
        (HEADER + "q1\t\t1\n", 2),  # empty corpus-id
        (HEADER + "q1\td1\t1\nq1\td1\t2\n", 3),  # duplicate pair
        (HEADER, None),  # header only
        ("", None),
    ],
)
def test_bad_qrels_raise_with_file_and_line(tmp_path, content, line):
    path = _write(tmp_path, "r.tsv", content)
    with pytest.raises(EvalInputError) as exc:
        load_qrels(path)
    _assert_input_error(exc, path, line)


def test_all_bad_lines_are_collected_in_one_error(tmp_path):
    path = _write(tmp_path, "r.tsv", HEADER + "q1\td1\tx\nq1\td2\t1\nq1\td3\ny\n")
    with pytest.raises(EvalInputError) as exc:
        load_qrels(path)
    _assert_input_error(exc, path, 2)
    assert [p.split(":")[0] for p in exc.value.evidence["problems"]] == ["line 2", "line 4", "line 5"]


# ----------------------------------------------------------------------------- id matching

MATCH_NOTES = [
    ("notes/alpha.md", "ID-1"),
    ("notes/beta.md", None),
    ("a/gamma.md", None),
    ("b/gamma.md", None),
    ("p.md", "q"),
    ("q.md", None),
    ("x.md", None),
    ("sub/x.md", None),
    ("one/dup.md", "same"),
    ("two/dup2.md", "same"),
    ("13.md", 13),
]


@pytest.mark.parametrize(
    "docid, expected",
    [
        ("ID-1", ("notes/alpha.md", "id")),
        ("notes/beta.md", ("notes/beta.md", "path")),
        ("notes/beta", ("notes/beta.md", "path")),
        ("beta", ("notes/beta.md", "stem")),
        ("alpha", ("notes/alpha.md", "stem")),  # a note with an id is still reachable by its stem
        ("q", ("p.md", "id")),  # id beats the path q.md
        ("x", ("x.md", "path")),  # path beats the ambiguous stem x
        ("13", ("13.md", "id")),  # YAML integer id
        ("gamma", (None, None)),  # ambiguous stem
        ("same", (None, None)),  # frontmatter id shared by two notes
        ("nothing", (None, None)),
        ("NOTES/BETA.md", (None, None)),  # matching is case-sensitive
    ],
)
def test_match_rules(docid, expected):
    assert DocIdMatcher(MATCH_NOTES).match(docid) == expected


def test_summary_counts_rules_and_reports_unmatched_and_ambiguous():
    matcher = DocIdMatcher(MATCH_NOTES)
    summary = matcher.summarize(["ID-1", "q", "notes/beta", "beta", "alpha", "gamma", "same", "nothing", "beta"])
    assert summary.by_rule == {"id": 2, "path": 1, "stem": 2}
    assert summary.unmatched_qrels_ids == ("gamma", "same", "nothing")
    assert summary.ambiguous == {"gamma": ("a/gamma.md", "b/gamma.md"), "same": ("one/dup.md", "two/dup2.md")}
    assert summary.total == 8  # the repeated "beta" is counted once


def test_a_note_listed_twice_is_refused():
    with pytest.raises(UsageError):
        DocIdMatcher([("a.md", None), ("a.md", "x")])


def test_non_scalar_frontmatter_id_is_refused():
    with pytest.raises(TypeError):
        DocIdMatcher([("a.md", ["x", "y"])])


# ----------------------------------------------------------------------------- evaluate

QUERIES = {"q1": "first", "q2": "second", "q3": "third", "q4": "no qrels", "q6": "ghost only", "q7": "zero only"}
QRELS = {
    "q1": {"A": 2, "b": 1},  # A by frontmatter id, b by stem
    "q2": {"c": 1},  # stem
    "q3": {"notes/d.md": 1, "ghost": 1},  # path; ghost matches no note -> partly matched
    "q5": {"b": 1},  # no such query
    "q6": {"ghost2": 1},  # no relevant id matches: excluded
    "q7": {"a": 0},  # no relevant grade: excluded
}
NOTES = [("notes/a.md", "A"), ("notes/b.md", None), ("notes/c.md", None), ("notes/d.md", None)]
RANKINGS = {
    "m1": {
        "first": ["notes/b.md", "x.md", "notes/a.md"],
        "second": ["notes/c.md"],
        "third": ["x.md", "y.md", "z.md", "notes/d.md"],
    },
    "m2": {"first": [], "second": ["x.md"], "third": ["notes/d.md"]},
}


class FakeSearch:
    """A dict lookup standing in for the engine; records every call; 'broken' fails closed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    def __call__(self, text: str, mode: str, depth: int) -> list[str]:
        self.calls.append((text, mode, depth))
        if mode == "broken":
            raise DenseIndexUnavailableError("no dense vectors in this generation")
        return RANKINGS[mode][text]


def _run(modes=("m1", "m2", "broken"), **kw):
    search = FakeSearch()
    report = evaluate(QUERIES, QRELS, DocIdMatcher(NOTES), search, list(modes), k=2, depth=10, **kw)
    return report, search


def test_evaluate_hand_computed_means():
    report, _ = _run(failures=True)
    m1, m2, _broken = report.modes
    # m1, k=2, depth=10 (judged: q1 {a:2, b:1}, q2 {c:1}, q3 {d:1, ghost:1})
    #   q1 b,x,a: DCG@2 = 1/1 = 1; IDCG@2 = 2 + 1/log2(3) -> 0.38010; recall 2/2; RR 1; P@2 1/2
    #   q2 c:     nDCG 1; recall 1; RR 1; P@2 1/2
    #   q3 x,y,z,d: nDCG@2 0; recall 1/2 (ghost is never found); RR 1/4; P@2 0
    q1_ndcg = 1 / (2 + 1 / LOG2_3)
    assert m1.n == 3
    assert m1.ndcg == pytest.approx((q1_ndcg + 1 + 0) / 3, abs=1e-12)
    assert m1.recall == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-12)
    assert m1.mrr == pytest.approx((1 + 1 + 0.25) / 3, abs=1e-12)
    assert m1.precision == pytest.approx((0.5 + 0.5 + 0) / 3, abs=1e-12)
    # m2: q1 empty and q2 x.md score 0; q3 d: DCG@2 1, IDCG@2 1 + 1/log2(3) -> 0.61315,
    #   recall 1/2, RR 1, P@2 1/2
    assert m2.ndcg == pytest.approx((1 / (1 + 1 / LOG2_3)) / 3, abs=1e-12)
    assert m2.recall == pytest.approx(0.5 / 3, abs=1e-12)
    assert m2.mrr == pytest.approx(1 / 3, abs=1e-12)
    assert m2.precision == pytest.approx(0.5 / 3, abs=1e-12)


def test_evaluate_reports_every_excluded_query_and_id():
    report, search = _run()
    assert report.n_queries == 6 and report.n_evaluated == 3
    assert report.queries_without_qrels == ("q4",)
    assert report.qrels_without_queries == ("q5",)
    assert report.unmatched_queries == ("q6",)
    assert report.queries_without_relevant == ("q7",)
    assert report.partially_matched_queries == ("q3",)
    assert report.unmatched_qrels_ids == ("ghost", "ghost2")
    # distinct qrels ids: A (id), b, c, a (stem), notes/d.md (path), ghost, ghost2 (unmatched)
    assert report.id_matching.by_rule == {"id": 1, "path": 1, "stem": 3}
    # excluded queries are never searched; every call asks for the full depth
    assert sorted(c for c in search.calls if c[1] == "m1") == [
        ("first", "m1", 10),
        ("second", "m1", 10),
        ("third", "m1", 10),
    ]


def test_failing_mode_is_reported_and_others_still_run():
    report, search = _run()
    broken = report.modes[2]
    assert not broken.ok
    assert broken.error_reason == "dense_index_unavailable"
    assert broken.error_query_id == "q1"
    assert broken.ndcg is None and broken.n == 0
    assert report.failed_modes == ("broken",)
    assert report.modes[0].ok and report.modes[1].ok
    report2, _ = _run(modes=("broken", "m1"))  # a failure first does not stop later modes
    assert report2.failed_modes == ("broken",) and report2.modes[1].n == 3


def test_other_exceptions_propagate():
    def search(text, mode, depth):
        raise RuntimeError("engine bug")

    with pytest.raises(RuntimeError):
        evaluate(QUERIES, QRELS, DocIdMatcher(NOTES), search, ["m1"])


def test_non_list_result_is_a_type_error():
    with pytest.raises(TypeError):
        evaluate(QUERIES, QRELS, DocIdMatcher(NOTES), lambda t, m, d: ("notes/a.md",), ["m1"])


def test_failures_list_best_rank_or_none():
    report, _ = _run(failures=True)
    m1, m2, broken = report.modes
    # m1: q3's relevant d is at rank 4 > k=2; q1 and q2 have a relevant note at rank 1
    assert [(f.query_id, f.best_rank, f.relevant) for f in m1.failures] == [("q3", 4, ("ghost", "notes/d.md"))]
    # m2: q1 returned nothing, q2 returned no relevant note; q3 has d at rank 1
    assert [(f.query_id, f.best_rank) for f in m2.failures] == [("q1", None), ("q2", None)]
    assert broken.failures is None
    assert _run()[0].modes[0].failures is None  # not asked for


def test_results_beyond_depth_do_not_count():
    ranked = [f"x{i}.md" for i in range(10)] + ["notes/c.md"]  # relevant at rank 11, depth 10
    report = evaluate(
        {"q2": "second"},
        {"q2": {"c": 1}},
        DocIdMatcher(NOTES),
        lambda t, m, d: ranked,
        ["m"],
        k=10,
        depth=10,
        failures=True,
    )
    assert report.modes[0].recall == 0.0
    assert report.modes[0].failures[0].best_rank is None


def test_latency_percentiles_from_the_clock():
    # calls take 1, 2 and 10 ms: p50 = 2; p95 at position 0.95*2 = 1.9 -> 2 + 0.9*(10-2) = 9.2
    durations = iter([0.001, 0.002, 0.010])
    now = [100.0]

    def clock():
        return now[0]

    def search(text, mode, depth):
        now[0] += next(durations)
        return RANKINGS["m1"][text]

    report = evaluate(QUERIES, QRELS, DocIdMatcher(NOTES), search, ["m1"], clock=clock)
    assert report.modes[0].latency_p50_ms == pytest.approx(2.0)
    assert report.modes[0].latency_p95_ms == pytest.approx(9.2)


def test_nothing_evaluable_is_an_input_error():
    with pytest.raises(EvalInputError) as exc:
        evaluate({"q6": "x"}, {"q6": {"ghost": 1}}, DocIdMatcher(NOTES), FakeSearch(), ["m1"])
    assert exc.value.reason == "eval_input"


@pytest.mark.parametrize(
    "kw", [dict(k=0), dict(depth=5), dict(k=20, depth=10), dict(modes=[]), dict(modes=["m1", "m1"]), dict(modes="m1")]
)
def test_bad_arguments_are_usage_errors(kw):
    args = dict(modes=["m1"]) | kw
    with pytest.raises(UsageError):
        evaluate(QUERIES, QRELS, DocIdMatcher(NOTES), FakeSearch(), **args)


# ----------------------------------------------------------------------------- rendering


def test_to_dict_is_json_ready():
    report, _ = _run(failures=True)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["unmatched_qrels_ids"] == ["ghost", "ghost2"]
    assert data["failed_modes"] == ["broken"]
    assert data["modes"][2]["error_reason"] == "dense_index_unavailable"
    assert data["modes"][0]["failures"][0]["best_rank"] == 4
    assert data["id_matching"]["by_rule"] == {"id": 1, "path": 1, "stem": 3}
    assert data["k"] == 2 and data["depth"] == 10 and data["mrr_k"] == 10


def test_format_table_rows():
    report, _ = _run()
    lines = report.format_table().splitlines()
    assert lines[0].split() == ["mode", "nDCG@2", "Recall@10", "MRR@10", "P@2", "p50", "ms", "p95", "ms", "n"]
    m1 = lines[1].split()
    assert m1[0] == "m1" and m1[-1] == "3"
    assert [float(v) for v in m1[1:5]] == pytest.approx(
        [report.modes[0].ndcg, report.modes[0].recall, report.modes[0].mrr, report.modes[0].precision], abs=5e-5
    )
    assert lines[3].split()[:3] == ["broken", "FAILED", "dense_index_unavailable"]
    assert lines[4].startswith("id matching: 5/7")
    assert len(lines) == 6
