"""bench/bench_sets.py (issue 26): the word-start sets it makes and how the report judges each set."""

from __future__ import annotations

from bench.bench_sets import Trigram, vault_titles, word_start_queries
from bench.report_sets import sets_target_rows


def test_word_starts_are_long_title_words_cut_after_five_or_six_letters_unique_among_titles() -> None:
    titles = {
        "a.md": "Cumulative Layout Shift",
        "b.md": "Cumulus clouds",  # shares "cumul" with a.md
        "c.md": "Horsemanship",
        "d.md": "Short",  # no word of 8 letters
    }
    got = word_start_queries(titles)
    assert got == word_start_queries(titles)  # seeded
    targets = {rel: cut for cut, rel in got.values()}
    assert "c.md" in targets and set(targets) <= {"a.md", "c.md"}
    assert targets["c.md"] in ("horse", "horsem")
    assert targets.get("a.md", "cumula") == "cumula"  # "cumul" starts b.md's word too: never a query


def test_a_title_is_the_frontmatter_title_else_the_first_heading_else_the_file_stem(tmp_path) -> None:
    (tmp_path / "a.md").write_text("---\ntitle: Named\n---\n# Heading\n")
    (tmp_path / "b.md").write_text("# First heading\n\ntext\n")
    (tmp_path / "c-note.md").write_text("text only\n")
    assert vault_titles(tmp_path) == {"a.md": "Named", "b.md": "First heading", "c-note.md": "c-note"}
    assert Trigram(tmp_path).search("named") == ["a.md"]  # the title is indexed beside the body


def test_word_start_and_prefix_sets_are_held_to_trigram_scifact_to_today_the_rest_to_today_minus_slack() -> None:
    cell = lambda x: {"n": 10, "ndcg10": x, "nohit": 0.0}  # noqa: E731
    lang = {
        "sets": {
            "v": {
                "word_start": {"now": cell(0.8), "today": cell(0.5), "fts5-trigram": cell(0.81), "bm25s": cell(0.1)},
                "heading": {"now": cell(0.95), "today": cell(0.954), "fts5-trigram": cell(0.5), "bm25s": cell(0.5)},
                "dev": {"now": cell(0.70), "today": cell(0.706), "fts5-trigram": cell(0.6), "bm25s": cell(0.6)},
            }
        }
    }
    assert [(r[1].split(" fts")[0], r[3]) for r in sets_target_rows(lang)] == [
        ("v word_start", "MISS"),
        ("v heading", "PASS"),
        ("v dev", "MISS"),
    ]
