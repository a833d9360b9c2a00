"""Phrases, word starts and typos that stay in their language (issue 26), on small vaults made here."""

from __future__ import annotations

import pytest

from core.searcher import search_vault
from tests.conftest import note

FILLER = "Der Bund regelt die Verwaltung der Länder nach Maßgabe dieses Gesetzes und der Verordnungen. "
PHRASE = "Die Würde des Menschen ist unantastbar"


def paths(vault, query, mode="fts", **kw):
    return [r.rel_path for r in search_vault(vault, query, mode=mode, **kw)]


@pytest.fixture(scope="module")
def laws(make_vault):
    files = {
        "gg.md": note("Grundgesetz", FILLER * 300 + PHRASE + ". Sie zu achten ist Verpflichtung. " + FILLER * 300),
        "lang.md": "# 长篇\n\n"
        + "这是一个很长的句子。" * 300
        + "所有权规则很重要。"
        + "这是一个很长的句子。" * 300
        + "\n",
        "kurz.md": "# 规则\n\n所有的规则和权利都很重要。权规则。所有权\n",
    }
    for i in range(8):  # short notes holding the words, apart
        files[f"n{i}.md"] = note(
            f"Gesetz {i}",
            "Der Menschen Würde ist wichtig, sagt man. Des Menschen Rechte, so heißt es oft, sind unantastbar.",
        )
    return make_vault(files, name="laws")


@pytest.mark.parametrize("mode", ["fts", "hybrid"])
def test_a_quoted_phrase_puts_the_one_long_note_holding_it_first(laws, mode):
    res = search_vault(laws, f'"{PHRASE}"', mode=mode)
    assert [r.rel_path for r in res][:1] == ["gg.md"]
    assert res[0].score_source.endswith("+phrase")
    assert all("+phrase" not in r.score_source for r in res[1:])
    assert {"word": PHRASE, "kind": "phrase", "to": [PHRASE]} in res.query_expansions


def test_a_quoted_cjk_phrase_needs_its_characters_adjacent(laws):
    res = search_vault(laws, '"所有权规则"', mode="fts")
    assert [r.rel_path for r in res][:1] == ["lang.md"]
    assert res[0].score_source.endswith("+phrase")


def test_raw_fts5_stays_the_escape_hatch_for_quotes(laws):
    res = search_vault(laws, '"menschen würde"', mode="fts", raw=True)
    assert {r.rel_path for r in res} == {f"n{i}.md" for i in range(8)}
    assert all(r.score_source == "fts5_match_bm25f" for r in res)


@pytest.fixture(scope="module")
def garden(make_vault):
    return make_vault(
        {
            "cls.md": note("Cumulative Layout Shift", "The layout shift measures the visual stability of pages."),
            "horse.md": note("Horsemanship", "Riding and caring for horses is an old craft."),
            "horsem.md": note("Horsem", "A village of that name."),
            "cloud.md": note("Cumulus clouds", "Clouds are nice. A cumulus is a cloud."),
            "cheatsheet.md": note("Cheatsheet", "Keys to remember for daily use."),
            "a.md": note("Shortcuts", "Print the cheatsheet. Do not cheat: read the cheatsheet first."),
            "b.md": note("Keys", "The cheatsheet lists every key."),
            "de.md": note("Über die Gärten", "Die Gärten sind schön und die Pflanzen wachsen dort jeden Sommer."),
            "fr.md": note("Les jardins", "Les jardins sont beaux et les plantes poussent dans le jardin chaque été."),
        },
        name="garden",
    )


@pytest.mark.parametrize(
    ("typed", "target"), [("cumula", "cls.md"), ("horsema", "horse.md"), ("layout cumula", "cls.md")]
)
def test_a_word_being_typed_finds_the_note_it_starts_labelled_prefix(garden, typed, target):
    """``cumula`` is French for a stem ``cumul`` (the vault has French notes): the word start must
    still be ``cumulative``, not ``cumulus``, and find its note."""
    res = search_vault(garden, typed, mode="fts")
    assert [r.rel_path for r in res][:1] == [target]
    assert "+prefix" in res[0].score_source
    last = typed.split()[-1]
    found = [e for e in res.query_expansions if e["word"] == last and e["kind"] == "prefix"]
    assert found and all(w.startswith(last) for w in found[0]["to"])


def test_a_rare_last_word_is_also_a_word_start_of_a_name(garden):
    """``cheat`` occurs once; ``cheatsheet`` in three notes, one of them named so."""
    res = search_vault(garden, "cheat", mode="fts")
    assert [r.rel_path for r in res][:1] == ["cheatsheet.md"]
    assert {"word": "cheat", "kind": "prefix"}.items() <= res.query_expansions[0].items()
    assert "a.md" in [r.rel_path for r in res]  # the word itself still matches


def test_an_exact_name_ranks_above_a_name_the_word_only_starts(garden):
    assert paths(garden, "horsem")[:2] == ["horsem.md", "horse.md"]


@pytest.mark.parametrize(
    ("files", "typed", "target"),
    [
        (
            {
                "t.md": note("Vererbung und die Prototypenkette", "Jedes Objekt hat einen Prototyp."),
                **{
                    f"x{i}.md": note(
                        f"Klassen {i}",
                        "Methoden werden vererbt. Die Vererbung von Methoden ist üblich, Vererbung hilft oft.",
                    )
                    for i in range(3)
                },
            },
            "verer",
            "t.md",
        ),
        (
            {
                "s.md": "# 同步冲突\n\n如果两台设备同时修改笔记，就会出现同步冲突。\n",
                "t.md": "# 天气\n\n今天的天气很好。同步很快。\n",
            },
            "同步冲",
            "s.md",
        ),
    ],
    ids=["de", "zh"],
)
def test_a_word_start_finds_its_note_in_german_and_chinese(make_vault, files, typed, target):
    """The note the word start names comes first, above notes that say its words more often (a CJK
    word start is served by its bigrams, as before)."""
    vault = make_vault(files, name=f"ws_{target}")
    assert paths(vault, typed)[:1] == [target]


@pytest.fixture(scope="module")
def mixed(make_vault):
    zh = "这是关于数据所有权的笔记。"
    return make_vault(
        {
            **{f"zh{i}.md": f"# 笔记{i}\n\n{zh}我们讨论数据和权利。第{i}部分。\n" for i in range(6)},
            "own.md": "# 所有权\n\nData ownership 是一个重要的概念。谁拥有数据？\n",
            "owners.md": "# 拥有者\n\nThe owners 是数据的拥有者。\n",
        },
        name="mixed",
    )


def test_a_typo_in_an_english_word_of_a_chinese_vault_is_corrected_not_cut(mixed):
    res = search_vault(mixed, "ownershp", mode="fts")
    assert [r.rel_path for r in res][:1] == ["own.md"]
    kinds = {e["kind"]: e["to"] for e in res.query_expansions}
    assert kinds.get("typo") == ["ownership"] and "variant" not in kinds


def test_a_compound_is_split_only_into_parts_of_one_language(make_vault):
    vault = make_vault(
        {
            "k.md": note("Kündigung", "Die Kündigung des Vertrags muss schriftlich erfolgen, sagt das Gesetz."),
            "f.md": note("Fristen", "Die Kündigungsfrist beträgt vier Wochen. Eine Frist ist eine Zeitspanne."),
            "en1.md": note("First steps", "The first thing you do is open the app and read the first page."),
            "en2.md": note("Getting started", "Start with the first note, then write your own notes every day."),
        },
        name="compound_lang",
    )
    res = search_vault(vault, "Kündigungsfirst", mode="fts")
    subword = [e["to"] for e in res.query_expansions if e["kind"] == "subword"]
    assert ["first", "kündigung"] not in [sorted(t) for t in subword]
    assert [r.rel_path for r in res][:1] == ["f.md"]


def test_a_passage_holding_the_query_words_together_lifts_a_long_note(make_vault):
    filler = "The garden needs water in summer and the roses want sun all day long. "
    scattered = "Rotate the tyres. " + filler * 6 + "Encryption is math. " + filler * 6 + "Keys open doors."
    vault = make_vault(
        {
            "manual.md": note(
                "Operations manual", filler * 12 + "Rotate the encryption keys every year. " + filler * 12
            ),
            **{f"s{i}.md": note(f"Notes {i}", scattered) for i in range(3)},
        },
        name="passage",
    )
    assert paths(vault, "rotate encryption keys")[:1] == ["manual.md"]
