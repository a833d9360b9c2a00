"""Which note a qrels corpus-id names: the frontmatter id, the path, or a unique file stem."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from core.errors import UsageError

MATCH_RULES = ("id", "path", "stem")


@dataclass(frozen=True)
class IdMatchSummary:
    """How a set of qrels corpus-ids matched notes: counts per rule, and what did not match.

    ``ambiguous`` maps an unmatched id to the notes it could have meant (a frontmatter id
    shared by several notes, or a stem shared by several files); those ids are also in
    ``unmatched_qrels_ids``.
    """

    by_rule: Mapping[str, int]
    unmatched_qrels_ids: tuple[str, ...]
    ambiguous: Mapping[str, tuple[str, ...]]

    @property
    def total(self) -> int:
        return sum(self.by_rule.values()) + len(self.unmatched_qrels_ids)

    def format_line(self) -> str:
        rules = ", ".join(f"{rule} {self.by_rule.get(rule, 0)}" for rule in MATCH_RULES)
        matched = sum(self.by_rule.values())
        return (
            f"id matching: {matched}/{self.total} qrels ids matched ({rules}); "
            f"unmatched {len(self.unmatched_qrels_ids)}, ambiguous {len(self.ambiguous)}"
        )


class DocIdMatcher:
    """Map a qrels corpus-id to a note of the vault.

    Rules, in order: (1) the note's frontmatter ``id``; (2) the vault-relative POSIX path,
    with or without the ``.md`` suffix; (3) the file stem, only when exactly one note has
    it. A frontmatter id shared by several notes is not used (rule 1 is skipped for it),
    and an ambiguous stem matches nothing; both are reported by :meth:`summarize`.
    ``notes`` yields ``(rel_path, frontmatter_id)``; an integer id (YAML ``id: 123``) is
    read as its string, and an empty id counts as none.
    """

    def __init__(self, notes: Iterable[tuple[str, str | int | None]]) -> None:
        self._by_id: dict[str, list[str]] = {}
        self._paths: set[str] = set()
        self._by_stem: dict[str, list[str]] = {}
        for rel_path, note_id in notes:
            if rel_path in self._paths:
                raise UsageError(f"note {rel_path!r} is listed twice", rel_path=rel_path)
            self._paths.add(rel_path)
            self._by_stem.setdefault(Path(rel_path).stem, []).append(rel_path)
            key = _note_id_key(rel_path, note_id)
            if key is not None:
                self._by_id.setdefault(key, []).append(rel_path)

    def _resolve(self, docid: str) -> tuple[str | None, str | None, tuple[str, ...]]:
        """(rel_path, rule, candidates): candidates lists the notes of an ambiguous id/stem."""
        ambiguous: list[str] = []
        by_id = self._by_id.get(docid, [])
        if len(by_id) == 1:
            return by_id[0], "id", ()
        ambiguous.extend(by_id)
        for candidate in (docid, f"{docid}.md"):
            if candidate in self._paths:
                return candidate, "path", ()
        by_stem = self._by_stem.get(docid, [])
        if len(by_stem) == 1:
            return by_stem[0], "stem", ()
        if len(by_stem) > 1:
            ambiguous.extend(by_stem)
        return None, None, tuple(sorted(set(ambiguous)))

    def match(self, docid: str) -> tuple[str | None, str | None]:
        """Return ``(rel_path, rule)`` with rule in {'id', 'path', 'stem'}, or ``(None, None)``."""
        rel_path, rule, _ = self._resolve(docid)
        return rel_path, rule

    def summarize(self, docids: Iterable[str]) -> IdMatchSummary:
        """Match every distinct id and count which rule matched it; list the failures."""
        counts = dict.fromkeys(MATCH_RULES, 0)
        unmatched: list[str] = []
        ambiguous: dict[str, tuple[str, ...]] = {}
        for docid in dict.fromkeys(docids):
            _, rule, candidates = self._resolve(docid)
            if rule is not None:
                counts[rule] += 1
                continue
            unmatched.append(docid)
            if candidates:
                ambiguous[docid] = candidates
        return IdMatchSummary(by_rule=counts, unmatched_qrels_ids=tuple(unmatched), ambiguous=ambiguous)


def _note_id_key(rel_path: str, note_id: str | int | None) -> str | None:
    if isinstance(note_id, int) and not isinstance(note_id, bool):
        return str(note_id)
    if note_id is not None and not isinstance(note_id, str):
        raise TypeError(f"{rel_path}: frontmatter id must be a string or an integer, got {type(note_id).__name__}")
    return (note_id or "").strip() or None
