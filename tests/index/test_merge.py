"""Merges (issue 29, "Merges"): the tiered policy (core.build.merge) and the merge itself
(core.build.optimize): a merge publishes a generation with the same live notes, and search_vault answers
exactly as before it (paths, scores, order, labels) in every mode, for restricted and unrestricted callers."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.build.lock import build_lock
from core.build.merge import (
    ALL,
    BUDGET,
    DELETES,
    FIT,
    FLOOR_NOTES,
    MAX_MERGE_AT_ONCE,
    SEGMENT_BUDGET,
    SEGMENTS_PER_TIER,
    TIER,
    Merge,
    SegmentInfo,
    choose_merges,
    fit_merges,
    segments_after,
    tier_of,
)
from core.build.optimize import DROPPED, MERGED, NOTHING_DUE, merge_generation, optimize_index, segment_infos
from core.index import verify
from core.index.layout import IndexLayout, layout_for
from core.index.manifest import MAX_SEGMENTS
from tests.index.test_segmented import base, publish_split, split_ids  # noqa: F401 (fixture)
from tests.index.test_segmented_search import CALLERS, MODES, QUERIES, _ranking


def _infos(*live: int, dead: int = 0, size: int = 1000) -> list[SegmentInfo]:
    return [SegmentInfo(live=n, dead=dead, size=size * max(n, 1)) for n in live]


# ---------------------------------------------------------------- the policy


def test_tiers_grow_by_the_factor_from_the_floor() -> None:
    assert [tier_of(n) for n in (0, 1, FLOOR_NOTES - 1, FLOOR_NOTES, 8 * FLOOR_NOTES - 1, 8 * FLOOR_NOTES)] == [
        0,
        0,
        0,
        1,
        1,
        2,
    ]


def test_a_big_segment_and_few_small_ones_are_left_alone() -> None:
    assert choose_merges(_infos(50_000, 3, 1, 2)) == []


def test_a_full_tier_is_merged_into_one_and_big_segments_stay() -> None:
    merges = choose_merges(_infos(50_000, 5_000, 1, 2, 1, 3))
    assert merges == [Merge((2, 3, 4, 5), TIER)]
    assert segments_after(6, merges) == 3


def test_a_tier_merge_reads_at_most_max_merge_at_once_smallest_first() -> None:
    merges = choose_merges(_infos(*range(1, 13)), budget=MAX_SEGMENTS)
    assert merges[0].reason == TIER
    assert merges[0].members == tuple(range(MAX_MERGE_AT_ONCE))


def test_a_segment_past_the_deleted_share_is_rewritten_alone() -> None:
    segments = [SegmentInfo(live=70, dead=30, size=10), SegmentInfo(live=5000, dead=100, size=10)]
    assert choose_merges(segments) == [Merge((0,), DELETES)]  # 30% > 20%; 2% is left


def test_a_segment_with_deletes_inside_a_full_tier_is_merged_once() -> None:
    segments = [SegmentInfo(live=2, dead=5, size=10)] + _infos(1, 1, 1)
    assert choose_merges(segments) == [Merge((0, 1, 2, 3), TIER)]


def test_the_budget_merges_the_smallest_outcomes() -> None:
    live = [40_000, 9_000, 3_000, 900, 600, 400, 90, 70, 30, 20]  # 3 per tier at most: no tier is full
    assert all(sum(tier_of(x) == t for x in live) < SEGMENTS_PER_TIER for t in range(6))
    merges = choose_merges(_infos(*live))
    assert merges == [Merge((7, 8, 9), BUDGET)]
    assert segments_after(len(live), merges) == SEGMENT_BUDGET


@pytest.mark.parametrize("seed", range(30))
def test_every_segment_in_at_most_one_merge_and_the_budget_holds(seed: int) -> None:
    rng = random.Random(seed)
    segments = [
        SegmentInfo(
            live=rng.choice([1, 3, 50, 400, 5000, 60000]), dead=rng.choice([0, 0, 1, 40]), size=rng.randint(1, 9)
        )
        for _ in range(rng.randint(1, MAX_SEGMENTS))
    ]
    merges = choose_merges(segments)
    members = [i for m in merges for i in m.members]
    assert len(members) == len(set(members))
    assert all(len(m.members) > 1 or m.reason == DELETES for m in merges)
    assert segments_after(len(segments), merges) <= SEGMENT_BUDGET
    assert choose_merges(segments, all_into_one=True) in ([], [Merge(tuple(range(len(segments))), ALL)])


def test_all_into_one_only_when_there_is_something_to_merge() -> None:
    assert choose_merges(_infos(10)) == []
    assert choose_merges(_infos(10, dead=1), all_into_one=True) == [Merge((0,), ALL)]
    assert choose_merges(_infos(10, 2), all_into_one=True) == [Merge((0, 1), ALL)]


def test_fit_merges_the_smallest_to_leave_room_for_the_delta() -> None:
    assert fit_merges(_infos(*range(100, 100 + MAX_SEGMENTS - 1))) == []
    live = [500, 9, 400, 3, 300, 7, 200, 100, 90, 80, 1]  # 11 segments: one more would be 12
    merges = fit_merges(_infos(*live))
    assert merges == [Merge((1, 3, 5, 9, 10), FIT)]  # the five smallest: 8 segments with the new one
    assert segments_after(len(live), merges) + 1 == SEGMENT_BUDGET


def test_a_budget_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="budget"):
        choose_merges(_infos(1), budget=MAX_SEGMENTS + 1)


# ---------------------------------------------------------------- a merge changes no result


def answers(
    root: Path, index_dir: Path | None, queries: tuple[str, ...] = QUERIES, callers: tuple = CALLERS
) -> dict[tuple, list]:
    """search_vault's hits (path, score, mode label) for every mode, query and caller."""
    verify.clear_verify_cache()
    return {
        (mode, query, classes): _ranking(root, index_dir, query, mode, classes)
        for mode in MODES
        for query in queries
        for classes in callers
    }


def _split(made: tuple, tmp_path: Path, k: int, seed: int) -> tuple[Path, Path, IndexLayout, set[int]]:
    root, segment, ids, tokenizer = made
    rng = random.Random(seed)
    dead = set(rng.sample(ids, 4))
    layout = layout_for(root, tmp_path / "idx")
    publish_split(layout, segment, split_ids(ids, k, rng), dead, tokenizer)
    return root, layout.index_dir, layout, dead


def _merge(layout: IndexLayout, merges: list[Merge]) -> dict:
    with build_lock(layout):
        return merge_generation(layout, verify.resolve(layout), merges, grace_s=0.0).to_dict()


@pytest.mark.parametrize(
    "merges",
    [
        [Merge((0, 1, 2, 3), ALL)],  # everything into one
        [Merge((1, 2), TIER)],  # the middle: the untouched segments' tombstones are listed again
        [Merge((0, 1), TIER), Merge((2, 3), TIER)],  # two merges, the newest segment in one
        [Merge((3,), DELETES)],  # the newest segment rewritten alone
    ],
    ids=["all", "middle", "two", "newest"],
)
def test_a_merge_changes_no_result(base: tuple, tmp_path: Path, merges: list[Merge]) -> None:  # noqa: F811
    root, index_dir, layout, dead = _split(base, tmp_path, 4, seed=3)
    before_infos = segment_infos(verify.resolve(layout))
    assert len(before_infos) == 4 and sum(s.dead for s in before_infos) == len(dead)
    expected = answers(root, index_dir)
    report = _merge(layout, merges)
    assert report["outcome"] == MERGED
    assert report["segments_after"] == segments_after(4, merges)
    after = verify.resolve(layout)
    assert after.generation_id == report["generation_after"] != report["generation_before"]
    infos = segment_infos(after)
    assert sum(s.live for s in infos) == sum(s.live for s in before_infos)
    merged_dead = sum(before_infos[i].dead for m in merges for i in m.members)
    assert sum(s.dead for s in infos) == len(dead) - merged_dead  # a merge drops its members' dead rows
    assert verify.verify_full(layout)["generation_id"] == after.generation_id
    assert answers(root, index_dir) == expected


def test_optimize_by_the_policy_then_into_one_segment(base: tuple, tmp_path: Path) -> None:  # noqa: F811
    root, index_dir, layout, _ = _split(base, tmp_path, 5, seed=5)  # 5 small segments: tier 0 is full
    expected = answers(root, index_dir)
    report = optimize_index(root, index_dir=index_dir, grace_s=0.0).to_dict()
    assert report["outcome"] == MERGED and report["segments_before"] == 5 and report["segments_after"] == 1
    assert report["merges"][0]["reason"] == TIER and report["bytes_written"] == report["merges"][0]["bytes_out"]
    assert answers(root, index_dir) == expected
    assert optimize_index(root, index_dir=index_dir).outcome == NOTHING_DUE  # no dead rows left either
    assert optimize_index(root, index_dir=index_dir, one_segment=True).outcome == NOTHING_DUE


def test_a_build_holding_the_lock_wins_and_the_merge_is_dropped(base: tuple, tmp_path: Path) -> None:  # noqa: F811
    root, index_dir, layout, _ = _split(base, tmp_path, 5, seed=7)
    active = verify.resolve(layout).generation_id
    with build_lock(layout):
        report = optimize_index(root, index_dir=index_dir)
    assert report.outcome == DROPPED and "lock" in (report.detail or "")
    assert verify.resolve(layout).generation_id == active


def test_incremental_edits_then_optimize_match_a_cold_build(tmp_path: Path) -> None:
    from tests.conftest import note, write_vault

    files = {f"n{i}.md": note(f"Note {i}", f"body {i} alpha beta {'gamma ' * i}") for i in range(8)}
    files["hub.md"] = note("Hub", "links [[n1]] and [[n2]]")
    root = write_vault(tmp_path / "vault", files)
    build_index(root)
    for i in range(3, 8):  # notes nobody links to: each edit publishes a delta segment and a tombstone
        (root / f"n{i}.md").write_text(note(f"Note {i}", f"edited {i} alpha"))
        assert build_index(root).one_segment_reason is None
    infos = segment_infos(verify.resolve(layout_for(root)))
    assert len(infos) == 6 and sum(s.dead for s in infos) == 5
    expected = answers(root, root / ".vaultsearch")
    assert optimize_index(root, grace_s=0.0).segments_after < 6
    assert answers(root, root / ".vaultsearch") == expected
    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    assert answers(cold, cold / ".vaultsearch") == expected
    shutil.rmtree(cold)


def _edited_vault(tmp_path: Path) -> Path:
    """A vault whose index holds delta segments and tombstones (edits of notes nobody links to)."""
    from tests.conftest import note, write_vault

    files = {f"n{i}.md": note(f"Note {i}", f"body {i} alpha beta zzyzx{i}", classification="public") for i in range(6)}
    root = write_vault(tmp_path / "vault", files)
    build_index(root)
    for i in range(3):
        (root / f"n{i}.md").write_text(note(f"Note {i}", f"edited {i} alpha"))
        assert build_index(root).one_segment_reason is None
    return root


def test_a_term_only_deleted_notes_held_is_unknown_after_a_merge(tmp_path: Path) -> None:
    # the merged segment keeps its oldest member's whole dictionary, zzyzx0 included (df 0 now); before the
    # fix it weighed in `vector`'s query norm and every score of the query dropped (core.ranking.sparse)
    root = _edited_vault(tmp_path)
    queries = ("alpha zzyzx0", "zzyzx0 zzyzx4 beta")
    before = {(m, q): _ranking(root, None, q, m, None) for m in MODES for q in queries}
    assert optimize_index(root, one_segment=True, grace_s=0.0).segments_after == 1
    verify.clear_verify_cache()
    assert {(m, q): _ranking(root, None, q, m, None) for m in MODES for q in queries} == before
    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    assert {(m, q): _ranking(cold, None, q, m, None) for m in MODES for q in queries} == before


def test_cli_index_optimize_reports_what_merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_cli import run, run_json

    root = _edited_vault(tmp_path)
    out = run_json(capsys, "index", str(root), "--optimize")
    assert out["build"]["up_to_date"] is True
    merged = out["optimize"]
    # four segments of tier 0 (3 live notes and 3 dead in the first, one note each in the deltas): one merge
    assert (merged["outcome"], merged["segments_before"], merged["segments_after"]) == (MERGED, 4, 1)
    assert (merged["parts_before"], merged["parts_after"]) == (5, 1) and merged["live_notes"] == 6
    assert merged["merges"] == [
        {"members": [0, 1, 2, 3], "reason": TIER, "bytes_in": merged["merges"][0]["bytes_in"],
         "bytes_out": merged["bytes_after"]}
    ]  # fmt: skip
    assert merged["bytes_written"] == merged["bytes_after"] < merged["bytes_before"]
    again = run_json(capsys, "index", str(root), "--optimize", "--one-segment")["optimize"]
    assert again["outcome"] == NOTHING_DUE and again["generation_after"] == merged["generation_after"]
    code, _, err = run(capsys, "index", str(root), "--one-segment")
    assert code != 0 and "--one-segment applies with --optimize" in err


def test_fit_merges_the_newest_when_they_are_about_as_small() -> None:
    """A vault edited note by note: the newest segments are the small ones, and merging them (a suffix)
    keeps the earlier segments first, so a running reader derives the merged generation's arrays."""
    live = [100_000, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1]
    assert fit_merges(_infos(*live)) == [Merge((6, 7, 8, 9, 10), FIT)]
    bulk = [100_000, 1, 1, 0, 1, 1, 0, 1, 5_000, 1, 1]  # a bulk import among the newest: the smallest instead
    assert fit_merges(_infos(*bulk)) == [Merge((3, 6, 7, 9, 10), FIT)]
