"""Language-aware, forgiving lexical search (issue 13), on small vaults made here."""

from __future__ import annotations

import shutil

import pytest

from core.build.builder import IndexConfig, build_index
from core.searcher import search_vault
from tests.conftest import note
from tests.paths import DATA

LEXICAL = ("fts", "vector", "hybrid", "graph_assisted")

FILES = {
    "konto.md": note(
        "Konto anlegen",
        """
        So legen Sie ein neues Konto an. Das Konto wird in der Übersicht angezeigt, und es ist
        danach sofort nutzbar. Die Einrichtung dauert nur wenige Minuten.
        """,
    ),
    "backup.md": note(
        "Dateisicherung einrichten",
        """
        Die Dateisicherung der Arbeitsverzeichnisse läuft jede Nacht. Sie wird in der Graphansicht
        angezeigt und ist für alle Nutzer sichtbar, wenn sie aktiviert wurde.
        """,
    ),
    "tokyo.md": "# 東京の天気\n\n今日の東京は晴れです。明日の天気も晴れでしょう。\n",
    "sync.md": "# 同步冲突\n\n如果两台设备同时修改笔记，就会出现同步冲突。请先备份。\n",
    "templater.md": note("Templater", "The Templater plugin runs scripts in a worktree and keeps attachments."),
    "templates.md": note(
        "Core templates",
        "Templates insert text. Templates live in a folder of templates; the templates plugin reads templates.",
    ),
    "minimal.md": note("Minimal theme", "A minimal theme for reading."),
    "minimize.md": note("Minimize windows", "Minimize the window to the tray."),
    "embed.md": note("Transclusion", "Embed a note in another one: put an exclamation mark before the link."),
    "howto.md": note(
        "Questions",
        """
        ## How do I start

        Start here.

        ## How do I begin

        Begin there.
        """,
    ),
}


@pytest.fixture(scope="module")
def vault(make_vault):
    return make_vault(FILES, name="lang")


def paths(vault, query, mode="fts", **kw):
    return [r.rel_path for r in search_vault(vault, query, mode=mode, **kw)]


@pytest.mark.parametrize("mode", LEXICAL)
def test_german_word_forms_find_each_other_in_every_lexical_mode(vault, mode):
    assert paths(vault, "Konten", mode)[:1] == ["konto.md"]
    assert paths(vault, "Arbeitsverzeichnis", mode)[:1] == ["backup.md"]


def test_a_compound_part_finds_the_compound_labelled_subword(vault):
    res = search_vault(vault, "Sicherung", mode="fts")
    assert [r.rel_path for r in res][:1] == ["backup.md"]
    assert "+subword" in res[0].score_source
    assert {"word": "sicherung", "kind": "subword"}.items() <= res.query_expansions[0].items()
    assert paths(vault, "Ansicht")[:1] == ["backup.md"]


def test_a_compound_missing_from_the_vault_is_split_into_its_parts(make_vault):
    root = make_vault(
        {
            "a.md": note("Graph", "Der Graph zeigt alle Notizen. Der Graph ist groß."),
            "b.md": note("Ansicht", "Die Ansicht wechseln Sie oben. Jede Ansicht hat Optionen."),
            "c.md": note("Suche", "Die Suche findet Notizen schnell und zuverlässig in jeder Sprache."),
        },
        name="compound",
    )
    res = search_vault(root, "Graphansicht", mode="fts")
    assert {r.rel_path for r in res} == {"a.md", "b.md"}
    assert [sorted(e["to"]) for e in res.query_expansions if e["kind"] == "subword"] == [["ansicht", "graph"]]


@pytest.mark.parametrize(
    ("query", "target"), [("東京", "tokyo.md"), ("天気", "tokyo.md"), ("同步", "sync.md"), ("冲突", "sync.md")]
)
@pytest.mark.parametrize("mode", LEXICAL)
def test_cjk_substrings_are_found_in_every_lexical_mode(vault, query, target, mode):
    assert paths(vault, query, mode)[:1] == [target]


def test_a_one_character_cjk_query_is_served_by_the_bigrams_that_hold_it_and_labelled(vault):
    res = search_vault(vault, "晴", mode="fts")
    assert [r.rel_path for r in res] == ["tokyo.md"]
    assert res[0].score_source == "bm25f+cjk_unigram"
    assert res.query_expansions[0]["kind"] == "cjk_unigram" and "晴れ" in res.query_expansions[0]["to"]


def test_an_exact_form_outranks_a_stem_only_match(vault):
    assert paths(vault, "templater")[:1] == ["templater.md"]
    assert paths(vault, "minimal")[:1] == ["minimal.md"]
    assert paths(vault, "minimize")[:1] == ["minimize.md"]


def test_a_prefix_finds_longer_words_labelled(vault):
    res = search_vault(vault, "worktr", mode="fts")
    assert [r.rel_path for r in res] == ["templater.md"]
    assert res[0].score_source == "bm25f+prefix"
    assert list(res.query_expansions) == [{"word": "worktr", "kind": "prefix", "to": ["worktree"]}]


@pytest.mark.parametrize(("typo", "word"), [("tempalter", "templater"), ("atachments", "attachments")])
def test_a_typo_is_corrected_to_a_vocabulary_word_one_edit_away_labelled(vault, typo, word):
    res = search_vault(vault, typo, mode="fts")
    assert [r.rel_path for r in res][:1] == ["templater.md"]
    assert res[0].score_source == "bm25f+typo"
    assert list(res.query_expansions) == [{"word": typo, "kind": "typo", "to": [word]}]


def test_stop_words_do_not_decide_the_ranking(vault):
    assert paths(vault, "how do I embed a note")[:1] == ["embed.md"]


def test_an_identifier_stays_literal(vault):
    res = search_vault(vault, "worktr-x", mode="fts")
    assert res.query_expansions == ()
    assert "worktr" in res.unmatched_words


def test_a_word_nothing_serves_is_reported_not_silently_dropped(vault):
    res = search_vault(vault, "qqqqzzzz", mode="fts")
    assert list(res) == [] and res.unmatched_words == ("qqqqzzzz",)
    assert res.to_dict()["unmatched_words"] == ["qqqqzzzz"]


def test_raw_fts5_syntax_still_works(vault):
    assert paths(vault, "Templater NOT core", raw=True) == ["templater.md"]


def test_frontmatter_language_decides_the_stemmer(make_vault):
    body = "Die Konten und das Konto."
    root = make_vault(
        {"de.md": note("A", body, lang="de"), "en.md": note("B", body, lang="en"), "x.md": note("C", "Other text.")},
        name="fm",
    )
    res = search_vault(root, "Konten", mode="fts")
    assert [r.rel_path for r in res][:1] == ["de.md"] and "en.md" in [r.rel_path for r in res]


def test_changing_the_vault_language_rebuilds_the_index(tmp_path):
    root = tmp_path / "v"
    root.mkdir()
    (root / "a.md").write_text("x = 1\n", encoding="utf-8")
    build_index(root, config=IndexConfig(language="en"))
    assert build_index(root, config=IndexConfig(language="en")).up_to_date
    report = build_index(root, config=IndexConfig(language="de"))
    assert report.full_rebuild_reason == "index_identity_changed"


MDN = DATA / "multilingual" / "vault"


@pytest.mark.skipif(not MDN.is_dir(), reason="the multilingual MDN corpus is not beside the checkout")
def test_real_mdn_pages_cjk_and_german(tmp_path):
    pages = {
        "ja/block.md": MDN / "ja/web/javascript/reference/statements/block/index.md",
        "ja/map.md": MDN / "ja/web/javascript/reference/global_objects/map/index.md",
        "de/map.md": MDN / "de/web/javascript/reference/global_objects/map/index.md",
        "de/guide.md": MDN / "de/web/javascript/guide/index.md",
    }
    root = tmp_path / "mdn"
    for rel, src in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, root / rel)
    build_index(root)
    assert paths(root, "ブロッ")[:1] == ["ja/block.md"]
    assert paths(root, "Leitfadens")[:1] == ["de/guide.md"]


def test_expansions_and_unmatched_words_see_only_visible_notes(make_vault):
    root = make_vault(
        {
            "pub.md": note("Workflow", "The workflow of the team.", classification="public"),
            "sec.md": note("Worktree", "The worktree of the secret project.", classification="restricted"),
        },
        name="vis",
    )
    visible = search_vault(root, "workt", mode="fts", classifications=("public",))
    assert list(visible) == [] and visible.query_expansions == () and visible.unmatched_words == ("workt",)
    everyone = search_vault(root, "workt", mode="fts")
    assert [e["to"] for e in everyone.query_expansions] == [["worktree"]]


# Notes laid out as MDN lays them out: every file is index.md, so every note's names hold "index".
NAMED = {
    "working_with_objects/index.md": note("객체로 작업하기", "객체는 속성의 모음입니다. 속성은 이름과 값을 가집니다."),
    "using_promises/index.md": note(
        "Using promises", "## 작업 순서\n\n프로미스는 비동기 작업의 결과입니다. 작업이 끝나면 값을 돌려줍니다."
    ),
    "object_assign/index.md": note(
        "Object.assign()", "## 작업 예제\n\n여러 객체를 합치는 작업입니다. 작업 결과는 대상 객체입니다."
    ),
    "closures/index.md": note("Closures", "A closure gives a function access to an outer scope."),
    "functions/index.md": note(
        "Functions", "## Closures\n\nFunctions form closures. Closures keep their scope; closures are values."
    ),
    **{f"page{i}/index.md": note(f"Page {i}", f"Filler page {i} about nothing in particular.") for i in range(6)},
}


@pytest.fixture(scope="module")
def named(make_vault):
    return make_vault(NAMED, name="named")


@pytest.mark.parametrize("mode", LEXICAL)
def test_a_note_whose_name_holds_the_query_ranks_above_notes_whose_headings_hold_it(named, mode):
    """A CJK title substring finds its note before notes that hold it in a heading and in their text
    (issue 13: the name bonus of a partial name was far below the heading bonus), in every lexical mode."""
    assert paths(named, "작업", mode)[:1] == ["working_with_objects/index.md"]


def test_a_name_word_every_note_shares_does_not_dilute_the_name(named):
    """ "index" (of index.md) is in every note's names: the note named "Closures" is named by the
    query "closures" as much as a note whose only name is "Closures" (idf-weighted name share)."""
    res = search_vault(named, "closures", mode="fts")
    assert [r.rel_path for r in res][:1] == ["closures/index.md"]
