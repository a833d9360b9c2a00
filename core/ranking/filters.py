"""Metadata filters, applied before ranking.

A ``Filters`` value compiles to one SQL WHERE clause over ``notes`` (values always bound).
Ranked modes turn it into a boolean mask over the documents before any top-k is taken;
raw FTS5 queries put the same clause in the MATCH statement itself.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from core.errors import FilterError
from core.index.schema import DATE_FIELDS

# A note whose frontmatter has no `classification` counts as this one.
UNCLASSIFIED = "public"


def _as_tuple(value: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _norm_date(value: str, *, end: bool) -> str:
    """ISO bound for comparison with stored ISO strings; a date-only upper bound covers the whole day."""
    try:
        if len(value) == 10:
            day = dt.date.fromisoformat(value)
            return (day + dt.timedelta(days=1)).isoformat() if end else day.isoformat()
        return dt.datetime.fromisoformat(value).isoformat()
    except ValueError as exc:
        raise FilterError(f"not an ISO date or datetime: {value!r}", value=value) from exc


@dataclass(frozen=True)
class Filters:
    """Every field narrows; an empty Filters() only hides superseded notes."""

    note_types: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    tags_any: tuple[str, ...] = ()
    path_prefixes: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    date_field: str = "updated"
    since: str | None = None
    until: str | None = None
    volatility: tuple[str, ...] = ()
    status: tuple[str, ...] = ()
    include_superseded: bool = False
    classifications: tuple[str, ...] | None = None  # None = no restriction

    @classmethod
    def make(cls, **kw: object) -> Filters:
        """Build from loose user input (strings or lists), normalising case of tags and classifications."""
        tuple_fields = ("note_types", "tags_all", "tags_any", "path_prefixes", "namespaces", "volatility", "status")
        args = {k: _as_tuple(v) for k, v in kw.items() if k in tuple_fields}  # type: ignore[arg-type]
        for k in ("tags_all", "tags_any"):
            if k in args:
                args[k] = tuple(t.lstrip("#").lower() for t in args[k])
        if kw.get("classifications") is not None:
            args["classifications"] = tuple(c.lower() for c in _as_tuple(kw["classifications"]))  # type: ignore
        for k in ("date_field", "since", "until", "include_superseded"):
            if kw.get(k) is not None:
                args[k] = kw[k]  # type: ignore[assignment]
        unknown = (
            set(kw) - set(tuple_fields) - {"classifications", "date_field", "since", "until", "include_superseded"}
        )
        if unknown:
            raise FilterError(f"unknown filter(s): {sorted(unknown)}")
        return cls(**args)  # type: ignore[arg-type]

    @property
    def is_default(self) -> bool:
        return self == Filters()

    def where(self) -> tuple[str, list[object]]:
        """(SQL condition over table alias ``n`` = notes, bound values)."""
        if self.date_field not in DATE_FIELDS:
            raise FilterError(
                f"unknown date field {self.date_field!r}; choose one of {', '.join(DATE_FIELDS)}", field=self.date_field
            )
        conds: list[str] = []
        vals: list[object] = []

        def one_of(column: str, values: tuple[str, ...], lower: bool = False) -> None:
            if values:
                col = f"lower({column})" if lower else column
                conds.append(f"{col} IN ({', '.join('?' * len(values))})")
                vals.extend(v.lower() if lower else v for v in values)

        one_of("n.note_type", self.note_types, lower=True)
        one_of("n.volatility", self.volatility, lower=True)
        one_of("n.status", self.status, lower=True)
        one_of("n.namespace", self.namespaces)
        for tag in self.tags_all:
            conds.append("n.id IN (SELECT note_id FROM note_tags WHERE tag = ?)")
            vals.append(tag)
        if self.tags_any:
            conds.append(
                f"n.id IN (SELECT note_id FROM note_tags WHERE tag IN ({', '.join('?' * len(self.tags_any))}))"
            )
            vals.extend(self.tags_any)
        if self.path_prefixes:
            conds.append("(" + " OR ".join("substr(n.rel_path, 1, ?) = ?" for _ in self.path_prefixes) + ")")
            for p in self.path_prefixes:
                p = p.lstrip("/")  # a trailing "/" stays: "projects/" must not match "projects2/"
                vals.extend((len(p), p))
        col = f"n.{self.date_field}"
        if self.since:
            conds.append(f"{col} >= ?")
            vals.append(_norm_date(self.since, end=False))
        if self.until:
            conds.append(f"{col} < ?" if len(self.until) == 10 else f"{col} <= ?")
            vals.append(_norm_date(self.until, end=True))
        if not self.include_superseded:
            conds.append(
                "NOT (n.superseded_by != '[]' OR lower(coalesce(n.status, '')) = 'superseded' OR n.id IN "
                "(SELECT dst_id FROM edges WHERE kind = 'supersedes' AND dst_id IS NOT NULL))"
            )
        if self.classifications is not None:
            conds.append(f"lower(coalesce(n.classification, ?)) IN ({', '.join('?' * len(self.classifications))})")
            vals.append(UNCLASSIFIED)
            vals.extend(self.classifications)
        return (" AND ".join(conds) or "1"), vals
