"""The merge policy (issue 29, "Merges"): which segments of a generation to rewrite together. Pure: it reads
only the numbers it is given (``SegmentInfo`` per segment, manifest order) and returns ``Merge`` groups;
``core.build.optimize`` writes and publishes them.

A simplified tiered policy, after Lucene's ``TieredMergePolicy`` and tantivy's ``LogMergePolicy``
(``/work/shared/design/segments.md`` 4.6): segments are grouped in size TIERS by their live notes (tier 0:
fewer than ``FLOOR_NOTES``; tier t: up to ``FLOOR_NOTES * TIER_FACTOR ** t``), so a vault settles into a
few large segments plus small recent ones (an edit publishes a one-note segment: tier 0).

1. **tier**: when a tier holds ``SEGMENTS_PER_TIER`` or more segments, they are merged into one (at most
   ``MAX_MERGE_AT_ONCE``, the smallest first) that lands in a higher tier: each note is rewritten about
   log_TIER_FACTOR(vault / FLOOR_NOTES) times over its life, not once per edit;
2. **deletes**: a segment whose dead share (tombstoned notes / all its notes) passes ``DELETES_PCT_ALLOWED``
   is rewritten (alone, or within its tier's merge), so its dead rows stop costing disk and query time;
3. **budget**: when the generation would still hold more than ``SEGMENT_BUDGET`` segments, the smallest
   outcomes (untouched segments or planned merges) are merged together until it holds ``SEGMENT_BUDGET``.
   ``SEGMENT_BUDGET`` < ``MAX_SEGMENTS`` (SQLite's ATTACH limit, 11) so that a few edits can still publish
   one delta segment each before a merge is due again.

A merge never changes a result (statistics are exact, ties break on the note's path): the policy decides
cost only. ``choose_merges(..., all_into_one=True)`` merges everything into one segment (``index
--optimize --one-segment``: the smallest index and the fastest one-shot search, at the cost of a full
rewrite); ``fit_merges`` is what an incremental build uses when one more segment would pass
``MAX_SEGMENTS``: the smallest segments merged into one, down to ``SEGMENT_BUDGET`` with the new delta.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.index.manifest import MAX_SEGMENTS

FLOOR_NOTES = 64  # tier 0: segments under 64 live notes (edits, adds); as tantivy's min layer, in notes
TIER_FACTOR = 8  # each tier holds segments up to 8x larger than the one below (tantivy: 8 per merge)
SEGMENTS_PER_TIER = 4  # a tier with 4 segments is merged (Lucene: 10; we have only 11 segments in all)
MAX_MERGE_AT_ONCE = 10  # Lucene's maxMergeAtOnce: the most segments one merge reads
DELETES_PCT_ALLOWED = 20.0  # Lucene's deletesPctAllowed: a segment over 20% dead notes is rewritten
# At the segment limit the newest segments merge instead of the smallest while they hold at most this many
# times the smallest ones' live notes (plus as many): a vault edited note by note has its smallest segments
# last, and a merge of a suffix keeps the earlier segments first, in order, so that a running reader derives
# the merged generation's arrays from the previous one's (core.modes.segment_arrays.kept_prefix) instead of
# combining every segment again (seconds at 100k notes).
SUFFIX_SLACK = 2
SEGMENT_BUDGET = 8  # the most segments a generation keeps after a merge (MAX_SEGMENTS - 3 delta segments)

TIER = "tier"
DELETES = "deletes"
BUDGET = "budget"
ALL = "all"
FIT = "segment_limit"


@dataclass(frozen=True)
class SegmentInfo:
    """One segment of a generation, as the manifest and its tombstone count it."""

    live: int  # notes not tombstoned
    dead: int  # notes its tombstone lists
    size: int  # bytes of the segment file

    @property
    def dead_pct(self) -> float:
        total = self.live + self.dead
        return 100.0 * self.dead / total if total else 0.0


@dataclass(frozen=True)
class Merge:
    """Segments (indexes in manifest order, ascending) written as one, and why."""

    members: tuple[int, ...]
    reason: str


def tier_of(live: int) -> int:
    """The tier of a segment of ``live`` notes: 0 below ``FLOOR_NOTES``, then one per ``TIER_FACTOR``x."""
    tier, bound = 0, FLOOR_NOTES
    while live >= bound:
        tier += 1
        bound *= TIER_FACTOR
    return tier


def _key(segments: Sequence[SegmentInfo], group: Sequence[int]) -> tuple[int, int, int]:
    """Smallest first: live notes, then bytes, then the newest (highest index) first among equals."""
    return (sum(segments[i].live for i in group), sum(segments[i].size for i in group), -max(group))


def _tier_merges(segments: Sequence[SegmentInfo]) -> list[list[int]]:
    by_tier: dict[int, list[int]] = {}
    for i, info in enumerate(segments):
        by_tier.setdefault(tier_of(info.live), []).append(i)
    out = []
    for tier in sorted(by_tier):
        members = sorted(by_tier[tier], key=lambda i: _key(segments, [i]))[:MAX_MERGE_AT_ONCE]
        if len(members) >= SEGMENTS_PER_TIER:
            out.append(members)
    return out


def _budget(
    segments: Sequence[SegmentInfo], groups: list[tuple[list[int], str]], budget: int
) -> list[tuple[list[int], str]]:
    """``groups`` (planned merges) and every other segment as outcomes; the smallest outcomes merged
    together until at most ``budget`` remain."""
    taken = {i for members, _ in groups for i in members}
    outcomes = groups + [([i], "") for i in range(len(segments)) if i not in taken]
    excess = len(outcomes) - budget
    if excess <= 0:
        return groups
    outcomes.sort(key=lambda o: _key(segments, o[0]))
    joined = sorted(i for members, _ in outcomes[: excess + 1] for i in members)
    rest = [o for o in outcomes[excess + 1 :] if o[1]]
    return rest + [(joined, BUDGET)]


def choose_merges(
    segments: Sequence[SegmentInfo], *, all_into_one: bool = False, budget: int = SEGMENT_BUDGET
) -> list[Merge]:
    """The merges the policy asks for on a generation of ``segments`` (manifest order); [] when none is due.
    Each segment is in at most one merge; the result has at most ``budget`` segments."""
    if not 1 <= budget <= MAX_SEGMENTS:
        raise ValueError(f"a segment budget is 1 to {MAX_SEGMENTS}, not {budget}")
    if all_into_one:
        if len(segments) > 1 or any(s.dead for s in segments):
            return [Merge(tuple(range(len(segments))), ALL)]
        return []
    groups: list[tuple[list[int], str]] = [(g, TIER) for g in _tier_merges(segments)]
    taken = {i for members, _ in groups for i in members}
    for i, info in enumerate(segments):
        if info.dead and info.dead_pct > DELETES_PCT_ALLOWED and i not in taken:
            groups.append(([i], DELETES))
    groups = _budget(segments, groups, budget)
    return sorted((Merge(tuple(sorted(m)), why) for m, why in groups), key=lambda m: m.members)


def fit_merges(segments: Sequence[SegmentInfo], adding: int = 1) -> list[Merge]:
    """An incremental build at the segment limit: when ``adding`` more segments would pass ``MAX_SEGMENTS``,
    the smallest segments merged into one so that the generation holds ``SEGMENT_BUDGET`` with them (not
    just ``MAX_SEGMENTS``: the next few edits then publish a delta without merging again); [] when they fit.
    The newest segments (a suffix, never the first) are taken instead when they are about as small
    (``SUFFIX_SLACK``)."""
    if len(segments) + adding <= MAX_SEGMENTS:
        return []
    take = max(2, len(segments) + adding - SEGMENT_BUDGET + 1)
    order = sorted(range(len(segments)), key=lambda i: _key(segments, [i]))
    smallest = tuple(sorted(order[:take]))
    newest = tuple(range(len(segments) - take, len(segments)))
    if newest[0] > 0 and _key(segments, newest)[0] <= SUFFIX_SLACK * _key(segments, smallest)[0] + SUFFIX_SLACK:
        return [Merge(newest, FIT)]
    return [Merge(smallest, FIT)]


def segments_after(count: int, merges: Sequence[Merge]) -> int:
    """How many segments a generation of ``count`` holds after ``merges``."""
    return count - sum(len(m.members) - 1 for m in merges)
