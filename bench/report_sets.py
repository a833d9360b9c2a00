"""The "Query sets, today and now (issue 26)" part of docs/benchmarks.md, from the ``sets`` results of
bench/results/lang.json (``bench.bench_sets`` through ``bench.bench_lang --only sets``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

BASELINES = ("fts5-trigram", "bm25s")
TODAY = "today"
SLACK = 0.005
BASELINE_SETS = ("word_start", "prefix")  # held to the trigram baseline
STEADY_SETS = ("dev", "train")  # SciFact: unchanged within SLACK


def _cell(r: dict[str, Any] | None) -> str:
    return "-" if not r else f"{r['ndcg10']:.3f} / {100 * r['nohit']:.0f}%"


def target(kind: str, row: dict[str, Any]) -> tuple[str, bool] | None:
    """(target, met) of one set on vaultsearch fts now; None without a ``today`` run."""
    now = row["now"]["ndcg10"]
    if kind in BASELINE_SETS:
        tri = row["fts5-trigram"]["ndcg10"]
        return f">= fts5-trigram {tri:.3f}", now >= tri
    if TODAY not in row:
        return None
    today = row[TODAY]["ndcg10"]
    if kind in STEADY_SETS:
        return f"{today:.3f} +- {SLACK}", abs(now - today) <= SLACK
    return f">= {today - SLACK:.3f} (today - {SLACK})", now >= today - SLACK


def _run_line(run: dict[str, Any] | None) -> list[str]:
    if not run:
        return []
    when = datetime.fromtimestamp(run["date"], tz=UTC).isoformat(timespec="seconds")
    return [f"Run {when}, 1-minute load average {run['loadavg'][0]:.1f} (quality only: no timing is taken)."]


def sets_section(lang: dict[str, Any]) -> list[str]:
    sets = lang.get("sets")
    if not sets:
        return []
    out = [
        "### Query sets, before and after the names, phrases and word-starts work",
        "",
        "Every title, heading, typo, prefix and word-start set, vaultsearch `fts` of the code at main",
        f"1017973 (`{TODAY}`) and of this tree (`now`), beside FTS5 trigram and",
        "bm25s, all in the same run (`bench/bench_sets.py` says how each is made and run). Each cell: nDCG@10 /",
        "share of queries with no hit. `word_start`: a title word of >= 8 letters cut after 5-6 letters",
        "that starts a word of no other title (seeded); `prefix`: a known-item query with its rarest word",
        "cut to 3-5 letters; `typo`: one edit in one word of >= 5 letters.",
        *_run_line(lang.get("sets_run")),
        "",
        "    git archive 1017973 | tar -x -C /tmp/today      # the code before (any tree holding core/)",
        "    python -m bench.bench_lang --only sets --code today=/tmp/today",
        "",
    ]
    head = ["corpus", "set", "n", *BASELINES, TODAY, "now", "target (now)", ""]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for corpus, rows in sets.items():
        for kind, row in rows.items():
            judged = target(kind, row)
            cells = [_cell(row.get(b)) for b in (*BASELINES, TODAY)]
            status = "" if judged is None else ("PASS" if judged[1] else "MISS")
            text = "" if judged is None else judged[0]
            out.append(
                f"| {corpus} | {kind} | {row['now']['n']} | {' | '.join(cells)} | **{_cell(row['now'])}** "
                f"| {text} | {status} |"
            )
    examples = [
        f"{corpus}: {', '.join(f'`{e}`' for e in rows['word_start'].get('examples', [])[:5])}"
        for corpus, rows in sets.items()
        if "word_start" in rows
    ]
    if examples:
        out += ["", "Word-start examples: " + "; ".join(examples) + "."]
    return [*out, ""]


def sets_target_rows(lang: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(area, target, measured, status) of issue 26, for the page's one table of targets."""
    rows = []
    for corpus, sets in (lang.get("sets") or {}).items():
        for kind, row in sets.items():
            judged = target(kind, row)
            if judged is not None:
                rows.append(
                    (
                        "sets",
                        f"{corpus} {kind} fts nDCG@10 {judged[0]}",
                        _cell(row["now"]),
                        "PASS" if judged[1] else "MISS",
                    )
                )
    return rows
