"""Metadata filters, applied before ranking.

A ``Filters`` value compiles to one SQL WHERE clause over ``notes`` (values always bound).
Ranked modes turn it into a boolean mask over the documents before any top-k is taken;
raw FTS5 queries put the same clause in the MATCH statement itself.

Tags are hierarchical, as in Obsidian: ``a`` matches ``a`` and every ``a/...`` (and Dendron's
dotted ``a....``); ``a/b`` matches only that branch.

Dates are compared as instants: every date field is stored beside its text as a UTC key
(microseconds since the epoch, ``utc_microseconds``); a bound is turned into the same key.
A date without a time is its day's midnight UTC, a datetime without an offset is read as UTC.
``date_field=None`` (the default) takes, per note, the first of ``updated, date, created,
mtime`` the note has (``DEFAULT_DATE_ORDER``); mtime is the file's modification time.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from core.errors import FilterError
from core.index.schema import DATE_FIELDS, date_key_column

# The date a note is filtered and labelled by when no date field is named: the first it has.
DEFAULT_DATE_ORDER = ("updated", "date", "created", "mtime")

# A note whose frontmatter has no `classification` counts as this one.
UNCLASSIFIED = "public"


def _as_tuple(value: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(value)
    return (value,)  # type: ignore[return-value]  # one value (a non-text one fails where it is checked)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def utc_microseconds(iso: str) -> int | None:
    """The instant of an ISO date or datetime as microseconds since the epoch, UTC (None: not ISO).

    ``2024-03-01`` is that day's midnight UTC; ``2024-03-01T05:30+05:30`` is ``2024-03-01T00:00Z``;
    a datetime without an offset is read as UTC.
    """
    try:
        parsed = dt.date.fromisoformat(iso) if len(iso) <= 10 else dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    if not isinstance(parsed, dt.datetime):
        parsed = dt.datetime(parsed.year, parsed.month, parsed.day)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    delta = parsed - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _is_date_only(value: str) -> bool:
    return len(value) <= 10


def _bound(value: object, *, end: bool) -> int:
    """A since/until bound as a UTC key; a date-only upper bound covers the whole day (exclusive next midnight)."""
    key = utc_microseconds(value) if isinstance(value, str) else None
    if key is None or not isinstance(value, str):
        raise FilterError(f"not an ISO date or datetime: {value!r}", value=str(value))
    return key + 86_400_000_000 if end and _is_date_only(value) else key


def _tag(value: object) -> str:
    """A tag filter value: no leading ``#``, no trailing separator, lower-cased; an empty one is an error."""
    tag = value.lstrip("#").rstrip("/.").strip().lower() if isinstance(value, str) else ""
    if not tag:
        raise FilterError(f"not a tag: {value!r}", value=str(value))
    return tag


@dataclass(frozen=True)
class Filters:
    """Every field narrows; an empty Filters() only hides superseded notes."""

    note_types: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    tags_any: tuple[str, ...] = ()
    path_prefixes: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    date_field: str | None = None  # None: the first of DEFAULT_DATE_ORDER the note has
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
                args[k] = tuple(_tag(t) for t in args[k])
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

    @property
    def has_restriction(self) -> bool:
        """True when the caller asked for anything beyond the default."""
        return not self.is_default

    def date_key_sql(self) -> str:
        """The SQL expression (alias ``n``) of the UTC key the date bounds compare against."""
        if self.date_field is None:
            return f"coalesce({', '.join(date_key_column(f) for f in DEFAULT_DATE_ORDER)})"
        if self.date_field not in DATE_FIELDS:
            raise FilterError(
                f"unknown date field {self.date_field!r}; choose one of {', '.join(DATE_FIELDS)}",
                field=str(self.date_field),
            )
        return date_key_column(self.date_field)

    def where(self) -> tuple[str, list[object]]:
        """(SQL condition over table alias ``n`` = notes, bound values)."""
        key = self.date_key_sql()
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
            cond, tag_vals = tag_subtree_condition((tag,))
            conds.append(f"n.id IN (SELECT note_id FROM note_tags WHERE {cond})")
            vals.extend(tag_vals)
        if self.tags_any:
            cond, tag_vals = tag_subtree_condition(self.tags_any)
            conds.append(f"n.id IN (SELECT note_id FROM note_tags WHERE {cond})")
            vals.extend(tag_vals)
        if self.path_prefixes:
            conds.append("(" + " OR ".join("substr(n.rel_path, 1, ?) = ?" for _ in self.path_prefixes) + ")")
            for p in self.path_prefixes:
                p = p.lstrip("/")  # a trailing "/" stays: "projects/" must not match "projects2/"
                vals.extend((len(p), p))
        if self.since is not None:
            conds.append(f"{key} >= ?")
            vals.append(_bound(self.since, end=False))
        if self.until is not None:
            until_date_only = isinstance(self.until, str) and _is_date_only(self.until)
            conds.append(f"{key} < ?" if until_date_only else f"{key} <= ?")
            vals.append(_bound(self.until, end=True))
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

    def date_label_order(self) -> tuple[str, ...]:
        """The date fields that decide a hit's date, in order (the named one, or the default order)."""
        return DEFAULT_DATE_ORDER if self.date_field is None else (self.date_field,)

    def visible_classification_clause(self) -> tuple[str, list[object]]:
        """Only the classification part (for graph expansion, which must never leak)."""
        if self.classifications is None:
            return "1", []
        return (
            f"lower(coalesce(n.classification, ?)) IN ({', '.join('?' * len(self.classifications))})",
            [UNCLASSIFIED, *self.classifications],
        )


def tag_subtree_condition(tags: tuple[str, ...]) -> tuple[str, list[object]]:
    """(condition over ``note_tags.tag``, values): the tag itself or any tag below it.

    ``a`` covers ``a`` and every tag starting ``a/`` or ``a.``: the key range ``['a.', 'a0')``
    (``.`` is 0x2E, ``/`` 0x2F, ``0`` 0x30), so the primary key index serves it.
    """
    conds: list[str] = []
    vals: list[object] = []
    for tag in tags:
        conds.append("(tag = ? OR (tag >= ? AND tag < ?))")
        vals.extend((tag, tag + ".", tag + "0"))
    return "(" + " OR ".join(conds) + ")", vals
