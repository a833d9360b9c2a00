"""Offline evaluation of retrieval modes against BEIR-style queries and qrels.

The library side of ``vaultsearch eval``. It never imports the search engine: the
caller passes a ``search(text, mode, depth) -> list[rel_path]`` callable.

    load_queries(path)        BEIR jsonl  {"_id", "text"} per line  -> {qid: text}     (core.eval.inputs)
    load_qrels(path)          TSV with header query-id/corpus-id/score -> {qid: {docid: rel}}
    DocIdMatcher(notes)       qrels corpus-id -> note rel_path (frontmatter id, path, stem)  (core.eval.matching)
    evaluate(...)             -> EvalReport (per-mode nDCG@k, Recall@depth, MRR@10, P@k,
                                 latency p50/p95, and everything that was left out, and why)

Nothing is dropped silently: queries without qrels, qrels without queries, qrels ids that
match no note, ambiguous stems and queries none of whose relevant notes exist are all
listed in the report. A mode whose search raises a ``VaultSearchError`` is reported as
failed with the error's ``reason``; any other exception propagates.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from core.errors import EvalInputError, UsageError, VaultSearchError
from core.eval import metrics
from core.eval.matching import DocIdMatcher, IdMatchSummary

_MAX_LISTED_PROBLEMS = 20  # unmatched qrels ids listed in a report
MRR_K = 10  # MRR is reported at a fixed cutoff of 10 (MS MARCO / BEIR convention)

SearchFn = Callable[[str, str, int], list[str]]


# ----------------------------------------------------------------------------- report


class RankedPaths(list):
    """A search's rel_paths, best first, with the mode that really ran and why it fell back (if it did)."""

    def __init__(self, paths: Iterable[str], actual_mode: str | None = None, fallback_reason: str | None = None):
        super().__init__(paths)
        self.actual_mode = actual_mode
        self.fallback_reason = fallback_reason


@dataclass(frozen=True)
class QueryFailure:
    """A query none of whose relevant notes reached the top k; ``best_rank`` is None when
    no relevant note was returned within the search depth. ``relevant`` lists the judged
    relevant notes (a qrels id that matches no note appears as the raw id)."""

    query_id: str
    text: str
    best_rank: int | None
    relevant: tuple[str, ...]
    actual_mode: str | None = None
    fallback_reason: str | None = None


@dataclass(frozen=True)
class ModeResult:
    """The means for one mode over the evaluated queries, or why the mode failed.

    When ``error_reason`` is set the mode failed (at ``error_query_id``) and every metric
    is None. ``failures`` is None unless failures were asked for.
    """

    mode: str
    n: int
    ndcg: float | None = None
    recall: float | None = None
    mrr: float | None = None
    precision: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    error_reason: str | None = None
    error_message: str | None = None
    error_query_id: str | None = None
    failures: tuple[QueryFailure, ...] | None = None
    # what really ran: actual mode -> queries, fallback reason -> queries (``auto`` may run fts)
    actual_modes: Mapping[str, int] = field(default_factory=dict)
    fallback_reasons: Mapping[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error_reason is None


@dataclass(frozen=True)
class EvalReport:
    """Everything ``evaluate`` measured and everything it left out, with the reasons.

    ``partially_matched_queries`` were evaluated although some relevant ids match no note:
    those ids stay in the judgement (they count in the ideal DCG and the recall
    denominator), so a missing note lowers the score rather than inflating it.
    """

    k: int
    depth: int
    mrr_k: int
    n_queries: int
    n_evaluated: int
    modes: tuple[ModeResult, ...]
    id_matching: IdMatchSummary
    queries_without_qrels: tuple[str, ...] = ()
    qrels_without_queries: tuple[str, ...] = ()
    queries_without_relevant: tuple[str, ...] = ()
    unmatched_queries: tuple[str, ...] = ()
    partially_matched_queries: tuple[str, ...] = ()
    evaluated_query_ids: tuple[str, ...] = field(default=(), repr=False)

    @property
    def unmatched_qrels_ids(self) -> tuple[str, ...]:
        return self.id_matching.unmatched_qrels_ids

    @property
    def failed_modes(self) -> tuple[str, ...]:
        return tuple(m.mode for m in self.modes if not m.ok)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists, mappings become dicts)."""
        out = asdict(self)
        out["unmatched_qrels_ids"] = list(self.unmatched_qrels_ids)
        out["failed_modes"] = list(self.failed_modes)
        return json.loads(json.dumps(out))

    def format_table(self) -> str:
        """A plain-text table, one row per mode, then the id-matching and query-count lines.

        A failed mode gets a row saying FAILED with its reason, the query it failed on and
        the error message, in place of numbers.
        """
        headers = (
            "mode",
            f"nDCG@{self.k}",
            f"Recall@{self.depth}",
            f"MRR@{self.mrr_k}",
            f"P@{self.k}",
            "p50 ms",
            "p95 ms",
            "n",
        )
        width = max(len(headers[0]), *(len(m.mode) for m in self.modes))
        cols = [max(len(h), 7) for h in headers[1:]]
        lines = [headers[0].ljust(width) + "".join(f"  {h:>{w}}" for h, w in zip(headers[1:], cols))]
        for m in self.modes:
            if not m.ok:
                lines.append(
                    f"{m.mode:<{width}}  FAILED {m.error_reason} (query {m.error_query_id}): {m.error_message}"
                )
                continue
            cells = (
                f"{m.ndcg:.4f}",
                f"{m.recall:.4f}",
                f"{m.mrr:.4f}",
                f"{m.precision:.4f}",
                f"{m.latency_p50_ms:.1f}",
                f"{m.latency_p95_ms:.1f}",
                str(m.n),
            )
            lines.append(m.mode.ljust(width) + "".join(f"  {c:>{w}}" for c, w in zip(cells, cols)))
        for m in self.modes:
            if m.ok and (set(m.actual_modes) - {m.mode} or m.fallback_reasons):
                ran = ", ".join(f"{mode} x{n}" for mode, n in sorted(m.actual_modes.items()))
                why = ", ".join(f"{reason} x{n}" for reason, n in sorted(m.fallback_reasons.items()))
                lines.append(f"{m.mode}: ran {ran}" + (f"; fallback {why}" if why else ""))
        lines.append(self.id_matching.format_line())
        lines.append(
            f"queries: {self.n_evaluated} of {self.n_queries} evaluated; {len(self.queries_without_qrels)} "
            f"without qrels, {len(self.qrels_without_queries)} qrels without a query, "
            f"{len(self.queries_without_relevant)} without a relevant grade, {len(self.unmatched_queries)} "
            f"with no relevant note in the vault, {len(self.partially_matched_queries)} partly matched"
        )
        return "\n".join(lines)

    def format_failures(self) -> str:
        """Plain text: per mode, each query with no relevant note in the top k, and its best rank."""
        lines: list[str] = []
        for m in self.modes:
            if m.failures is None:
                continue
            lines.append(f"{m.mode}: {len(m.failures)} queries with no relevant note in the top {self.k}")
            for f in m.failures:
                rank = f"best rank {f.best_rank}" if f.best_rank is not None else f"not in top {self.depth}"
                ran = f"  (ran {f.actual_mode}" + (f", fallback {f.fallback_reason})" if f.fallback_reason else ")")
                ran = ran if f.actual_mode and (f.actual_mode != m.mode or f.fallback_reason) else ""
                lines.append(f"  {f.query_id}  [{rank}]  {f.text}  -> {', '.join(f.relevant)}{ran}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class _Plan:
    judged: dict[str, dict[str, int]]
    without_qrels: tuple[str, ...]
    without_queries: tuple[str, ...]
    without_relevant: tuple[str, ...]
    unmatched: tuple[str, ...]
    partial: tuple[str, ...]
    id_summary: IdMatchSummary


def _judge_query(judgements: Mapping[str, int], matcher: DocIdMatcher) -> tuple[dict[str, int], int, int]:
    """Map one query's qrels onto notes: (judged, n relevant matched, n relevant unmatched).

    Several ids naming the same note keep the highest grade. Unmatched ids are kept under
    their raw id (which is no note's path, so no search can return it).
    """
    judged: dict[str, int] = {}
    matched_rel = unmatched_rel = 0
    for docid, rel in judgements.items():
        rel_path, _ = matcher.match(docid)
        key = rel_path if rel_path is not None else docid
        judged[key] = max(rel, judged.get(key, rel))
        if rel > 0:
            matched_rel += rel_path is not None
            unmatched_rel += rel_path is None
    return judged, matched_rel, unmatched_rel


def _plan(queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]], matcher: DocIdMatcher) -> _Plan:
    """Decide which queries are evaluated, and record every one that is not, with why."""
    judged: dict[str, dict[str, int]] = {}
    without_relevant: list[str] = []
    unmatched: list[str] = []
    partial: list[str] = []
    for qid in queries:
        if qid not in qrels:
            continue
        mapped, matched_rel, unmatched_rel = _judge_query(qrels[qid], matcher)
        if matched_rel + unmatched_rel == 0:
            without_relevant.append(qid)
        elif matched_rel == 0:
            unmatched.append(qid)
        else:
            judged[qid] = mapped
            if unmatched_rel:
                partial.append(qid)
    return _Plan(
        judged=judged,
        without_qrels=tuple(q for q in queries if q not in qrels),
        without_queries=tuple(q for q in qrels if q not in queries),
        without_relevant=tuple(without_relevant),
        unmatched=tuple(unmatched),
        partial=tuple(partial),
        id_summary=matcher.summarize(d for judgements in qrels.values() for d in judgements),
    )


def _check_ranking(ranked: object, mode: str, qid: str) -> list[str]:
    if not isinstance(ranked, list) or not all(isinstance(r, str) for r in ranked):
        raise TypeError(
            f"search(mode={mode!r}) for query {qid!r} must return a list of rel_path strings, "
            f"got {type(ranked).__name__}"
        )
    return ranked


def _scores(ranked: list[str], judged: Mapping[str, int], k: int, depth: int) -> tuple[float, float, float, float]:
    """(nDCG@k, Recall@depth, MRR@10, P@k) of one ranking."""
    return (
        metrics.ndcg_at_k(ranked, judged, k),
        metrics.recall_at_k(ranked, judged, depth),
        metrics.mrr_at_k(ranked, judged, MRR_K),
        metrics.precision_at_k(ranked, judged, k),
    )


def _run_mode(
    mode: str,
    plan: _Plan,
    queries: Mapping[str, str],
    search: SearchFn,
    k: int,
    depth: int,
    failures: bool,
    clock: Callable[[], float],
) -> ModeResult:
    """Search every evaluated query in one mode, timing each call, and average the metrics."""
    latencies: list[float] = []
    rows: list[tuple[float, float, float, float]] = []
    failed: list[QueryFailure] = []
    ran: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for qid, judged in plan.judged.items():
        start = clock()
        try:
            ranked = search(queries[qid], mode, depth)
        except VaultSearchError as err:
            return ModeResult(mode=mode, n=0, error_reason=err.reason, error_message=err.message, error_query_id=qid)
        latencies.append((clock() - start) * 1000.0)
        actual, reason = getattr(ranked, "actual_mode", None), getattr(ranked, "fallback_reason", None)
        ran.update([actual] if actual else [])
        reasons.update([reason] if reason else [])
        ranked = _check_ranking(ranked, mode, qid)[:depth]
        rows.append(_scores(ranked, judged, k, depth))
        best = metrics.first_relevant_rank(ranked, judged)
        if failures and (best is None or best > k):
            relevant = tuple(sorted(metrics.relevant_ids(judged)))
            failed.append(QueryFailure(qid, queries[qid], best, relevant, actual_mode=actual, fallback_reason=reason))
    ndcg, recall, mrr, precision = (metrics.mean(col) for col in zip(*rows))
    return ModeResult(
        mode=mode,
        n=len(rows),
        ndcg=ndcg,
        recall=recall,
        mrr=mrr,
        precision=precision,
        latency_p50_ms=metrics.percentile(latencies, 50),
        latency_p95_ms=metrics.percentile(latencies, 95),
        failures=tuple(failed) if failures else None,
        actual_modes=dict(ran),
        fallback_reasons=dict(reasons),
    )


def _check_arguments(modes: Sequence[str], k: int, depth: int) -> None:
    if isinstance(modes, str) or not modes:
        raise UsageError("modes must be a non-empty sequence of mode names")
    if len(set(modes)) != len(modes):
        raise UsageError(f"modes must not repeat: {list(modes)}")
    for name, value in (("k", k), ("depth", depth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{name} must be a positive integer, got {value!r}")
    if depth < max(k, MRR_K):
        raise UsageError(f"depth ({depth}) must be at least k ({k}) and {MRR_K} (for MRR@{MRR_K})")


def evaluate(
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    matcher: DocIdMatcher,
    search: SearchFn,
    modes: Sequence[str],
    k: int = 10,
    depth: int = 100,
    failures: bool = False,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> EvalReport:
    """Run ``search(text, mode, depth)`` for every mode and evaluable query; report the means.

    Per mode: mean nDCG@k, Recall@depth, MRR@10 and P@k over the evaluated queries, the
    p50/p95 latency of the search calls in milliseconds, and the number of queries. A
    query is evaluated when it has qrels with a relevant grade (> 0) and at least one of
    its relevant ids matches a note. A ``VaultSearchError`` from ``search`` marks that
    mode failed (with the error's reason) and the next mode runs. With ``failures``, each
    mode lists the queries with no relevant note in the top k and the best rank reached.
    Raises ``EvalInputError`` when no query can be evaluated at all. ``clock`` (seconds,
    monotonic) times each call; tests pass a fake one.
    """
    _check_arguments(modes, k, depth)
    plan = _plan(queries, qrels, matcher)
    if not plan.judged:
        raise EvalInputError(
            "no query can be evaluated: none has qrels with a relevant note that matches the vault",
            queries_without_qrels=len(plan.without_qrels),
            unmatched_queries=len(plan.unmatched),
            unmatched_qrels_ids=list(plan.id_summary.unmatched_qrels_ids[:_MAX_LISTED_PROBLEMS]),
        )
    results = tuple(_run_mode(m, plan, queries, search, k, depth, failures, clock) for m in modes)
    return EvalReport(
        k=k,
        depth=depth,
        mrr_k=MRR_K,
        n_queries=len(queries),
        n_evaluated=len(plan.judged),
        modes=results,
        id_matching=plan.id_summary,
        queries_without_qrels=plan.without_qrels,
        qrels_without_queries=plan.without_queries,
        queries_without_relevant=plan.without_relevant,
        unmatched_queries=plan.unmatched,
        partially_matched_queries=plan.partial,
        evaluated_query_ids=tuple(plan.judged),
    )
