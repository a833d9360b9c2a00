"""Metadata filters, applied before ranking.

A ``Filters`` value compiles to one SQL WHERE clause over ``notes`` (values always bound).
Ranked modes turn it into a boolean mask over the documents before any top-k is taken;
raw FTS5 queries put the same clause in the MATCH statement itself. Each list of values is one
bound JSON array read with ``json_each``, so a clause stays small for 2 or 40,000 tags or prefixes.

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
import json
from dataclasses import dataclass

from core.errors import FilterError
from core.index.tables.notes import DATE_FIELD_NAMES, date_key_column

# The date a note is filtered and labelled by when no date field is named: the first it has.
DEFAULT_DATE_ORDER = ("updated", "date", "created", "mtime")

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
    date_field: str | None = None  # None: the first of DEFAULT_DATE_ORDER the note has
    since: str | None = None
    until: str | None = None
    volatility: tuple[str, ...] = ()
    status: tuple[str, ...] = ()
    include_superseded: bool = False
    classifications: tuple[str, ...] | None = None  # None = no restriction; () = nothing visible

    @classmethod
    def make(cls, **kw: object) -> Filters:
        """Build from loose user input (strings or lists), normalising case of tags and classifications."""
        unknown = set(kw) - set(_TUPLE_FIELDS) - {"classifications", *_SCALAR_FIELDS}
        if unknown:
            raise FilterError(f"unknown filter(s): {sorted(map(str, unknown))}"[:300])
        tuples = {k: _as_tuple(v, k) for k, v in kw.items() if k in _TUPLE_FIELDS}
        for k in ("tags_all", "tags_any"):
            if k in tuples:
                tuples[k] = tuple(_tag(t) for t in tuples[k])
        args: dict[str, object] = dict(tuples)
        if kw.get("classifications") is not None:  # () is not None: an empty list hides every note
            args["classifications"] = tuple(
                c.strip().lower() for c in _as_tuple(kw["classifications"], "classifications") if c.strip()
            )  # a blank value names no classification (the CLI's `--classification ''` is the empty list)
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

    def date_key_sql(self) -> str:
        """The SQL expression (alias ``n``) of the UTC key the date bounds compare against."""
        if self.date_field is None:
            return f"coalesce({', '.join(date_key_column(f) for f in DEFAULT_DATE_ORDER)})"
        return date_key_column(self._named_date_field())

    def _named_date_field(self) -> str:
        """The index's date field ``date_field`` names (``modified`` names ``updated``); a FilterError
        listing every accepted name otherwise."""
        name = DATE_FIELD_NAMES.get(str(self.date_field))
        if name is None:
            raise FilterError(
                f"unknown date field {self.date_field!r}; choose one of {', '.join(DATE_FIELD_NAMES)}",
                field=str(self.date_field),
                choices=list(DATE_FIELD_NAMES),
            )
        return name

    def date_label_order(self) -> tuple[str, ...]:
        """The date fields that decide a hit's date, in order (the named one, or the default order)."""
        return DEFAULT_DATE_ORDER if self.date_field is None else (self._named_date_field(),)

    def where(self, superseded: list[int] | None = None) -> tuple[str, list[object]]:
        """(SQL condition over table alias ``n`` = notes, bound values).

        ``superseded``: the ids of the notes a restricted caller's visible notes supersede (its links
        resolved among its visible notes, core.ranking.visibility); without it supersession is read
        from the stored edges whose source note the caller may see.

        Each list of values is one bound JSON array read with ``json_each``, so the clause stays
        the same size for 2 or 40,000 tags / prefixes (SQLite's expression tree stays small).
        Tags match their subtree (``a`` matches ``a``, ``a/...`` and ``a....``); dates compare as
        UTC instants (``date_key_sql``)."""
        key = self.date_key_sql()  # an unknown date field is refused even without a bound
        parts = [
            *self._field_conditions(),
            *self._tag_conditions(),
            *self._path_conditions(),
            *self._date_conditions(key),
            *self._supersession_conditions(superseded),
        ]
        if self.classifications is not None:
            parts.append(self._classification("n"))
        return (" AND ".join(c for c, _ in parts) or "1"), [v for _, vals in parts for v in vals]

    def _field_conditions(self) -> list[tuple[str, list[object]]]:
        """Note type, volatility and status (case-insensitive), namespace: each one of the given values."""
        out: list[tuple[str, list[object]]] = []
        for column, values, lower in (
            ("n.note_type", self.note_types, True),
            ("n.volatility", self.volatility, True),
            ("n.status", self.status, True),
            ("n.namespace", self.namespaces, False),
        ):
            if values:
                out.append(
                    (
                        f"{f'lower({column})' if lower else column} IN {_JSON_VALUES}",
                        [_json_array([v.lower() if lower else v for v in values])],
                    )
                )
        return out

    def _tag_conditions(self) -> list[tuple[str, list[object]]]:
        """All of ``tags_all``, one of ``tags_any``: each tag with its subtree."""
        out: list[tuple[str, list[object]]] = []
        if self.tags_all:
            tags = sorted(set(self.tags_all))
            out.append(
                (
                    f"n.id IN (SELECT t.note_id FROM json_each(?) q JOIN note_tags t ON {_TAG_SUBTREE} "
                    "GROUP BY t.note_id HAVING count(DISTINCT q.value) = ?)",
                    [_json_array(tags), len(tags)],
                )
            )
        if self.tags_any:
            out.append(
                (
                    f"n.id IN (SELECT t.note_id FROM json_each(?) q JOIN note_tags t ON {_TAG_SUBTREE})",
                    [_json_array(sorted(set(self.tags_any)))],
                )
            )
        return out

    def _path_conditions(self) -> list[tuple[str, list[object]]]:
        """A path under one of the prefixes: a key range per prefix."""
        prefixes = {p.lstrip("/") for p in self.path_prefixes}  # a trailing "/" stays: "projects/" != "projects2/"
        if not prefixes or "" in prefixes:  # the empty prefix holds every path
            return []
        return [
            (
                "n.id IN (SELECT m.id FROM json_each(?) r JOIN notes m ON m.rel_path >= json_extract(r.value, '$[0]') "
                "AND m.rel_path < json_extract(r.value, '$[1]'))",
                [_json_array([[p, _successor(p)] for p in sorted(prefixes)])],
            )
        ]

    def _date_conditions(self, key: str) -> list[tuple[str, list[object]]]:
        """``since`` / ``until`` against the date key ``key`` (SQL; a date-only ``until`` takes its whole day)."""
        out: list[tuple[str, list[object]]] = []
        if self.since is not None:
            out.append((f"{key} >= ?", [_bound(self.since, end=False)]))
        if self.until is not None:
            until_date_only = isinstance(self.until, str) and _is_date_only(self.until)
            out.append((f"{key} < ?" if until_date_only else f"{key} <= ?", [_bound(self.until, end=True)]))
        return out

    def _supersession_conditions(self, superseded: list[int] | None) -> list[tuple[str, list[object]]]:
        """Not superseded (unless ``include_superseded``): by its own frontmatter, or by a visible note."""
        if self.include_superseded:
            return []
        if superseded is not None:
            return [
                (
                    "NOT (n.superseded_by != '[]' OR lower(coalesce(n.status, '')) = 'superseded' OR n.id IN "
                    f"{_JSON_VALUES})",
                    [_json_array(sorted(superseded))],
                )
            ]
        # supersession counts only what the caller may see: a hidden note's `supersedes:` hides nothing
        by_visible, by_vals = ("", []) if self.classifications is None else self._classification("s")
        return [
            (
                "NOT (n.superseded_by != '[]' OR lower(coalesce(n.status, '')) = 'superseded' OR n.id IN "
                "(SELECT e.dst_id FROM edges e"
                + (" JOIN notes s ON s.id = e.src_id" if by_visible else "")
                + " WHERE e.kind = 'supersedes' AND e.dst_id IS NOT NULL"
                + (f" AND {by_visible}" if by_visible else "")
                + "))",
                by_vals,
            )
        ]

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
# A note tag ``t.tag`` in the subtree of a query tag ``q.value``: itself, or ``q/...`` or ``q....`` -
# the key range ['q.', 'q0') (``.`` is 0x2E, ``/`` 0x2F, ``0`` 0x30), which the primary key index serves.
_TAG_SUBTREE = "(t.tag = q.value OR (t.tag >= q.value || '.' AND t.tag < q.value || '0'))"


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
