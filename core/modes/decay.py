"""Volatility and age down-weighting of ranked hits: an option of ``search_vault``, off by default.

A note whose frontmatter says it is ``volatile`` (or ``evolving``) loses weight as it ages: its
score is multiplied by ``scoring.volatility_age_decay`` of its age, dated by the first date field
it has among ``AgeDecay.date_fields`` (``git_date`` first: a git-sourced index knows when a note
last changed; then ``updated``, ``date``, ``created``). ``stable`` notes and notes without a
volatility or a date keep their score (the key ``""`` of ``half_lives`` gives notes without a
volatility a half-life too). The mode is asked for ``candidates`` hits, they are
re-scored and re-sorted, and the best ``limit`` are kept; each re-scored hit's ``score_source``
says ``+age_decay``. Applies to modes whose scores are non-negative (every registered mode's are:
BM25, RRF, cosine of non-negative sparse vectors, cross-encoder sigmoid); a negative score is
left as it is.
"""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from core.errors import UsageError
from core.index.tables.notes import DATE_FIELDS, decay_rows
from core.ranking.scoring import volatility_age_decay

if TYPE_CHECKING:
    from core.modes.context import Hit

DEFAULT_HALF_LIVES = MappingProxyType({"volatile": 30.0, "evolving": 180.0, "stable": math.inf})


@dataclass(frozen=True)
class AgeDecay:
    """How hits are down-weighted by volatility and age (see the module docstring)."""

    half_lives: Mapping[str, float] = field(default_factory=lambda: DEFAULT_HALF_LIVES)  # volatility -> days
    floor: float = 0.25
    date_fields: tuple[str, ...] = ("git_date", "updated", "date", "created")
    candidates: int = 100
    now: float | None = None  # epoch seconds (None: the time of the search)

    def __post_init__(self) -> None:
        if not 0.0 <= self.floor <= 1.0:
            raise UsageError(f"decay floor must be within [0, 1], not {self.floor}", floor=self.floor)
        unknown = [f for f in self.date_fields if f not in DATE_FIELDS or f == "mtime"]  # ISO text columns only
        if unknown or not self.date_fields:
            raise UsageError(f"unknown date field(s) {unknown}; choose from {', '.join(DATE_FIELDS)}")
        if any(not h > 0 for h in self.half_lives.values()):
            raise UsageError("every half-life must be > 0 days (math.inf: no decay)")


def _age_days(value: str | None, now: float) -> float:
    if not value:
        return math.nan
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return math.nan
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (now - when.timestamp()) / 86_400.0


def apply_decay(conn: sqlite3.Connection, hits: list[Hit], decay: AgeDecay, limit: int) -> list[Hit]:
    """The best ``limit`` of ``hits`` after down-weighting them (a stable sort: ties keep mode order)."""
    if not hits:
        return hits
    now = decay.now if decay.now is not None else dt.datetime.now(dt.UTC).timestamp()
    ids = [h.note_id for h in hits]
    rows = {r[0]: r[1:] for r in decay_rows(conn, ids, decay.date_fields)}
    half = np.array([decay.half_lives.get(rows[i][0], math.inf) for i in ids], dtype=np.float64)
    age = np.array([_age_days(rows[i][1], now) for i in ids], dtype=np.float64)
    half = np.where(np.isnan(age), math.inf, half)  # no date: nothing to decay by
    factors = volatility_age_decay(np.nan_to_num(age), half, decay.floor)
    out = []
    for h, f in zip(hits, factors.tolist()):
        if f == 1.0 or h.score < 0:
            out.append(h)
        else:
            out.append(replace(h, score=h.score * f, score_source=f"{h.score_source}+age_decay"))
    out.sort(key=lambda h: -h.score)
    return out[:limit]
