"""The inputs of an evaluation: BEIR queries (JSONL) and qrels (TSV), every problem of a file reported at once.

load_queries(path)        BEIR jsonl  {"_id", "text"} per line  -> {qid: text}
load_qrels(path)          TSV with header query-id/corpus-id/score -> {qid: {docid: rel}}
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from core.errors import EvalInputError

QRELS_HEADER = ("query-id", "corpus-id", "score")
_INT_RE = re.compile(r"-?[0-9]+")
_MAX_LISTED_PROBLEMS = 20


def _input_error(path: Path, problems: list[tuple[int | None, str]]) -> EvalInputError:
    """One error for all problems found in a file; the message names the first one."""
    line, problem = problems[0]
    where = f"{path}, line {line}" if line is not None else str(path)
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    listed = [f"line {n}: {p}" if n is not None else p for n, p in problems[:_MAX_LISTED_PROBLEMS]]
    return EvalInputError(f"{where}: {problem}{more}", path=str(path), line=line, problems=listed)


def _read_lines(path: str | Path) -> tuple[Path, list[str]]:
    """Read a UTF-8 text file (a BOM is tolerated) into lines without their line endings."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise _input_error(p, [(None, "file not found")]) from None
    except OSError as err:
        raise _input_error(p, [(None, f"cannot read file: {err.strerror or err}")]) from err
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise _input_error(p, [(line, "invalid UTF-8")]) from err
    lines = [ln.removesuffix("\r") for ln in text.split("\n")]  # not splitlines(): JSON may hold U+2028
    if not any(ln.strip() for ln in lines):
        raise _input_error(p, [(None, "empty file")])
    return p, lines


def _query_from_line(line: str) -> tuple[str, str] | str:
    """Parse one jsonl line into (qid, text), or return the problem as a string."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        return f"bad JSON: {err.msg} (column {err.colno})"
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    qid = obj.get("_id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    if not isinstance(qid, str) or not qid.strip():
        return "missing or empty '_id' (a string)"
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        return "missing or empty 'text' (a string)"
    return qid, text


def _parse_rows(
    p: Path, numbered: Iterable[tuple[int, str]], parse: Callable[[str], tuple | str], key: Callable[[tuple], object]
) -> list[tuple]:
    """Parse each non-blank numbered line; a repeated ``key`` is a problem. Every problem is
    collected, then one ``EvalInputError`` names the file and the first bad line."""
    rows: list[tuple] = []
    first_at: dict[object, int] = {}
    problems: list[tuple[int | None, str]] = []
    for n, line in numbered:
        parsed = parse(line) if line.strip() else None
        if isinstance(parsed, str):
            problems.append((n, parsed))
        elif parsed is not None and key(parsed) in first_at:
            problems.append((n, f"duplicate {key(parsed)!r} (first on line {first_at[key(parsed)]})"))
        elif parsed is not None:
            first_at[key(parsed)] = n
            rows.append(parsed)
    if problems:
        raise _input_error(p, problems)
    return rows


def load_queries(path: str | Path) -> dict[str, str]:
    """Load BEIR queries (jsonl, ``{"_id": ..., "text": ...}`` per line; other keys ignored).

    Blank lines are skipped; an integer ``_id`` is read as its string; a repeated ``_id``
    is an error. Every bad line is reported (see :func:`_parse_rows`).
    """
    p, lines = _read_lines(path)
    return dict(_parse_rows(p, enumerate(lines, start=1), _query_from_line, key=lambda row: row[0]))


def _qrel_from_line(line: str) -> tuple[str, str, int] | str:
    """Parse one qrels row into (qid, docid, score), or return the problem as a string."""
    fields = line.split("\t")
    if len(fields) != 3:
        return f"expected 3 tab-separated columns (query-id, corpus-id, score), got {len(fields)}"
    qid, docid, score = (f.strip() for f in fields)
    if not qid or not docid:
        return "empty query-id or corpus-id"
    if not _INT_RE.fullmatch(score):
        return f"score {score!r} is not an integer"
    return qid, docid, int(score)


def load_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Load BEIR qrels: a TSV with the header ``query-id corpus-id score`` and integer scores.

    Columns are split on tabs only (vault paths may contain spaces). Blank lines are
    skipped. A repeated (query-id, corpus-id) pair is an error. Every bad line is reported.
    """
    p, lines = _read_lines(path)
    header = next(i for i, ln in enumerate(lines) if ln.strip())
    if tuple(f.strip() for f in lines[header].split("\t")) != QRELS_HEADER:
        raise _input_error(
            p, [(header + 1, f"expected the header 'query-id<TAB>corpus-id<TAB>score', got {lines[header]!r}")]
        )
    rows = _parse_rows(p, enumerate(lines[header + 1 :], start=header + 2), _qrel_from_line, key=lambda row: row[:2])
    qrels: dict[str, dict[str, int]] = {}
    for qid, docid, score in rows:
        qrels.setdefault(qid, {})[docid] = score
    if not qrels:
        raise _input_error(p, [(None, "no qrels rows after the header")])
    return qrels
