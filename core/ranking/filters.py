"""Metadata filters, applied before ranking.

A ``Filters`` value compiles to one SQL WHERE clause over ``notes`` (values always bound).
Ranked modes turn it into a boolean mask over the documents before any top-k is taken;
raw FTS5 queries put the same clause in the MATCH statement itself.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from core.errors import FilterError
from core.index.schema import DATE_FIELDS

# A note whose frontmatter has no `classification` counts as this one.
UNCLASSIFIED = "public"


def _as_tuple(value: object, name: str = "filter") -> tuple[str, ...]:
    """A string or a list/tuple of strings as a tuple; anything else is a FilterError."""
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise FilterError(f"{name} must be a string or a list of strings, got {value!r}"[:300], filter=name)
    for v in items:
        _check_text(v, name)
    return tuple(items)


def _check_text(value: str, name: str) -> None:
    """Filter text must be valid Unicode (no lone surrogates): it is bound into SQL as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FilterError(f"{name} is not valid text (lone surrogate at {exc.start})", filter=name) from exc


def _norm_date(value: str, *, end: bool) -> str:
    """ISO bound for comparison with stored ISO strings; a date-only upper bound covers the whole day."""
    try:
        if len(value) == 10:
            day = dt.date.fromisoformat(value)
            return (day + dt.timedelta(days=1)).isoformat() if end else day.isoformat()
        return dt.datetime.fromisoformat(value).isoformat()
    except ValueError as exc:
        raise FilterError(f"not an ISO date or datetime: {value!r}", value=value) from exc


_TUPLE_FIELDS = ("note_types", "tags_all", "tags_any", "path_prefixes", "namespaces", "volatility", "status")
_SCALAR_FIELDS = ("date_field", "since", "until", "include_superseded")


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
        unknown = set(kw) - set(_TUPLE_FIELDS) - {"classifications", *_SCALAR_FIELDS}
        if unknown:
            raise FilterError(f"unknown filter(s): {sorted(map(str, unknown))}"[:300])
        args: dict[str, object] = {k: _as_tuple(v, k) for k, v in kw.items() if k in _TUPLE_FIELDS}
        for k in ("tags_all", "tags_any"):
            if k in args:
                args[k] = tuple(t.lstrip("#").lower() for t in args[k])  # type: ignore[attr-defined]
        if kw.get("classifications") is not None:
            args["classifications"] = tuple(c.lower() for c in _as_tuple(kw["classifications"], "classifications"))
        for k in _SCALAR_FIELDS:
            if kw.get(k) is not None:
                args[k] = kw[k]
        made = cls(**args)  # type: ignore[arg-type]
        made.validate()
        return made

    def validate(self) -> None:
        """Raise FilterError unless every field has its type (a Filters may be built directly)."""
        for name in _TUPLE_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, tuple):
                raise FilterError(f"{name} must be a tuple of strings, got {value!r}"[:300], filter=name)
            _as_tuple(value, name)
        if self.classifications is not None:
            if not isinstance(self.classifications, tuple):
                raise FilterError(f"classifications must be a tuple of strings, got {self.classifications!r}"[:300])
            _as_tuple(self.classifications, "classifications")
        for name in ("date_field", "since", "until"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise FilterError(f"{name} must be an ISO date string, got {value!r}"[:300], filter=name)
            if value is not None:
                _check_text(value, name)
        if not isinstance(self.include_superseded, bool):
            raise FilterError(f"include_superseded must be True or False, got {self.include_superseded!r}"[:300])
        self.where()  # the date field and the dates themselves

    @property
    def is_default(self) -> bool:
        return self == Filters()

    @property
    def has_restriction(self) -> bool:
        """True when the caller asked for anything beyond the default."""
        return not self.is_default

    def where(self, superseded: list[int] | None = None) -> tuple[str, list[object]]:
        """(SQL condition over table alias ``n`` = notes, bound values).

        ``superseded``: the ids of the notes a restricted caller's visible notes supersede (its links
        resolved among its visible notes, core.ranking.visibility); without it supersession is read
        from the stored edges whose source note the caller may see.

        Each list of values is one bound JSON array read with ``json_each``, so the clause stays
        the same size for 2 or 40,000 tags / prefixes (SQLite's expression tree stays small)."""
        if self.date_field not in DATE_FIELDS:
            raise FilterError(
                f"unknown date field {self.date_field!r}; choose one of {', '.join(DATE_FIELDS)}", field=self.date_field
            )
        conds: list[str] = []
        vals: list[object] = []

        def one_of(column: str, values: tuple[str, ...], lower: bool = False) -> None:
            if values:
                conds.append(f"{f'lower({column})' if lower else column} IN {_JSON_VALUES}")
                vals.append(_json_array([v.lower() if lower else v for v in values]))

        one_of("n.note_type", self.note_types, lower=True)
        one_of("n.volatility", self.volatility, lower=True)
        one_of("n.status", self.status, lower=True)
        one_of("n.namespace", self.namespaces)
        if self.tags_all:
            tags = sorted(set(self.tags_all))
            conds.append(
                f"n.id IN (SELECT note_id FROM note_tags WHERE tag IN {_JSON_VALUES} "
                "GROUP BY note_id HAVING count(DISTINCT tag) = ?)"
            )
            vals.extend((_json_array(tags), len(tags)))
        if self.tags_any:
            conds.append(f"n.id IN (SELECT note_id FROM note_tags WHERE tag IN {_JSON_VALUES})")
            vals.append(_json_array(sorted(set(self.tags_any))))
        prefixes = {p.lstrip("/") for p in self.path_prefixes}  # a trailing "/" stays: "projects/" != "projects2/"
        if prefixes and "" not in prefixes:  # the empty prefix holds every path
            conds.append(
                "n.id IN (SELECT m.id FROM json_each(?) r JOIN notes m ON m.rel_path >= json_extract(r.value, '$[0]') "
                "AND m.rel_path < json_extract(r.value, '$[1]'))"
            )
            vals.append(_json_array([[p, _successor(p)] for p in sorted(prefixes)]))
        col = f"n.{self.date_field}"
        if self.since:
            conds.append(f"{col} >= ?")
            vals.append(_norm_date(self.since, end=False))
        if self.until:
            conds.append(f"{col} < ?" if len(self.until) == 10 else f"{col} <= ?")
            vals.append(_norm_date(self.until, end=True))
        if not self.include_superseded and superseded is not None:
            conds.append(
                "NOT (n.superseded_by != '[]' OR lower(coalesce(n.status, '')) = 'superseded' OR n.id IN "
                f"{_JSON_VALUES})"
            )
            vals.append(_json_array(sorted(superseded)))
        elif not self.include_superseded:
            # supersession counts only what the caller may see: a hidden note's `supersedes:` hides nothing
            by_visible, by_vals = ("", []) if self.classifications is None else self._classification("s")
            conds.append(
                "NOT (n.superseded_by != '[]' OR lower(coalesce(n.status, '')) = 'superseded' OR n.id IN "
                "(SELECT e.dst_id FROM edges e"
                + (" JOIN notes s ON s.id = e.src_id" if by_visible else "")
                + " WHERE e.kind = 'supersedes' AND e.dst_id IS NOT NULL"
                + (f" AND {by_visible}" if by_visible else "")
                + "))"
            )
            vals.extend(by_vals)
        if self.classifications is not None:
            clause, cvals = self._classification("n")
            conds.append(clause)
            vals.extend(cvals)
        return (" AND ".join(conds) or "1"), vals

    def _classification(self, alias: str) -> tuple[str, list[object]]:
        """The visible-classification condition over notes aliased ``alias`` (classifications set)."""
        assert self.classifications is not None
        return (
            f"lower(coalesce({alias}.classification, ?)) IN {_JSON_VALUES}",
            [UNCLASSIFIED, _json_array(sorted(set(self.classifications)))],
        )

    def visible_classification_clause(self) -> tuple[str, list[object]]:
        """Only the classification part (for graph expansion and visibility statistics, which must never leak)."""
        if self.classifications is None:
            return "1", []
        return self._classification("n")


_JSON_VALUES = "(SELECT value FROM json_each(?))"


def _json_array(values: list) -> str:
    """One bound value holding a whole list (read in SQL with json_each)."""
    return json.dumps(values, ensure_ascii=False)


def _successor(prefix: str) -> str:
    """The least string above every string that starts with ``prefix`` (code point order, which is
    SQLite's BINARY order of UTF-8 text): the prefix with its last code point incremented."""
    while prefix and ord(prefix[-1]) == 0x10FFFF:
        prefix = prefix[:-1]
    if not prefix:
        return "\U0010ffff" * 2  # above any path the filesystem can hold
    nxt = ord(prefix[-1]) + 1
    if 0xD800 <= nxt <= 0xDFFF:  # no surrogates in text
        nxt = 0xE000
    return prefix[:-1] + chr(nxt)
