"""Per-note language choice and per-language term analysis (core.ranking.languages)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.build.builder import IndexConfig
from core.errors import UsageError
from core.ranking import languages
from core.ranking.analysis import language_analyzer_for
from core.ranking.languages import (
    LanguageAnalysis,
    analysis_identity,
    check_language,
    cjk_grams,
    detect_language,
    fold_latin,
    normalize_language,
    note_language,
)

ROOT = Path(__file__).resolve().parents[2]
GERMAN = "Der Kontostand wird in der Übersicht angezeigt, und die Konten sind nach dem Datum sortiert. " * 3
FRENCH = "Les tableaux sont des objets qui contiennent une liste de valeurs et ils sont dans le code. " * 3
ENGLISH = "The templates are in the folder and the plugin reads them when you open a note with it. " * 3


@pytest.mark.parametrize(
    ("value", "code"),
    [("de", "de"), ("de-DE", "de"), ("German", "de"), ("pt_BR", "pt"), ("zh-CN", "zh"), ("klingon", None), (3, None)],
)
def test_frontmatter_language_values_are_normalised(value, code):
    assert normalize_language(value) == code


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        (GERMAN, "de"),
        (FRENCH, "fr"),
        (ENGLISH, "en"),
        ("東京の天気は晴れです。明日も晴れるでしょう。", "ja"),
        ("同步冲突的解决方法很简单，请先备份数据。", "zh"),
        ("동기화 충돌을 해결하는 방법은 간단합니다.", "ko"),
        ("Итерации по свойствам объекта и массива в цикле.", "ru"),
    ],
)
def test_language_is_detected_by_script_then_profile(text, lang):
    assert detect_language(text, default="xx") == lang


def test_short_or_code_text_gets_the_vault_default():
    assert detect_language("x = map(f, xs)", default="de") == "de"
    assert detect_language("", default="fr") == "fr"


def test_frontmatter_language_wins_over_detection():
    assert note_language("fr", ENGLISH, "en") == "fr"
    assert note_language("not-a-language", GERMAN, "en") == "de"


def test_an_unknown_vault_default_is_a_usage_error():
    with pytest.raises(UsageError) as err:
        check_language("klingon")
    assert err.value.reason == UsageError.reason
    with pytest.raises(UsageError):
        IndexConfig(language="klingon")


def test_stems_are_namespaced_and_exact_forms_kept_only_where_they_differ():
    terms = LanguageAnalysis("en").terms_of(["templater", "templates", "test"])
    assert terms["templater"] == ("en:templat", "=templater")
    assert terms["templates"] == ("en:templat", "=templates")
    assert terms["test"] == ("en:test",)  # the word is its own stem: one term


def test_german_stems_fold_diacritics_but_the_exact_form_keeps_them():
    terms = LanguageAnalysis("de").terms_of(["über", "konten"])
    assert terms["über"] == ("de:uber", "=über")
    assert terms["konten"] == ("de:kont", "=konten")


def test_a_language_without_a_stemmer_folds_only():
    assert LanguageAnalysis("xx").terms_of(["élément", "code"]) == {
        "élément": ("element", "=élément"),
        "code": ("code",),
    }
    assert fold_latin("ёлка über") == "елка uber"


def test_cjk_runs_become_bigrams_a_single_character_a_unigram():
    assert cjk_grams("東京都") == ["東京", "京都"]
    assert cjk_grams("東") == ["東"]
    terms = LanguageAnalysis("ja").terms_of(["東京都tower", "東"])
    assert terms["東京都tower"] == ("東京", "京都", "=東京都", "tower")
    assert terms["東"] == ("東",)


def test_words_of_a_note_in_another_language_are_tagged_and_analysed_in_it():
    analyzer = language_analyzer_for("en")
    assert analyzer.terms("Konten Templates") == ["en:konten", "en:templat", "=templates"]
    assert analyzer.terms("Konten", language="de") == ["de:kont", "=konten"]


def test_the_analysis_identity_names_the_default_language():
    assert analysis_identity("en") != analysis_identity("de")
    assert IndexConfig(language="de").identity()["analysis"] == analysis_identity("de")


_CJK_CLASS = f"[{languages._CJK}]"
_SCRIPT_TEXT = st.text(
    alphabet=st.sampled_from("aZ9-_ é東京タワー한국어中文\U00020001ß\u3000\u1100\uff70 "), min_size=0, max_size=12
)


@settings(max_examples=300, deadline=None)
@given(_SCRIPT_TEXT)
def test_script_helpers_answer_as_the_regexes_they_compile_on_first_use(text: str) -> None:
    """has_cjk / is_cjk_run / script_runs: an ASCII word is answered without compiling a CJK class;
    every answer is what the regexes give."""
    assert languages.has_cjk(text) == (re.search(_CJK_CLASS, text) is not None)
    assert languages.is_cjk_run(text) == (bool(text) and re.match(_CJK_CLASS, text) is not None)
    assert languages.script_runs(text) == re.findall(f"{_CJK_CLASS}+|[^{languages._CJK}]+", text)


def test_an_ascii_query_compiles_no_cjk_class() -> None:
    """The CJK classes take several ms to compile (re walks every code point of their ranges): a new
    process analysing an ASCII query never compiles them."""
    code = (
        "from core.ranking import languages as L\n"
        "from core.ranking.languages import LanguageAnalysis\n"
        "LanguageAnalysis('en').terms_of(['remove', 'item', 'force'])\n"
        "L.has_cjk('remove'); L.script_runs('item'); L.is_cjk_run('force')\n"
        "print([p._compiled is None for p in (L._CJK_RUN, L._HAS_CJK, L._KANA, L._HANGUL)])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[True, True, True, True]"


_PROFILE_TEXT = st.lists(
    st.sampled_from([*"aeiouAEZßéèüÀÿ×÷ '’-.,\n0\u00a0«»°≥βœŁıİ東", "die ", "the ", "und ", "les ", "für ", "être "]),
    max_size=80,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_PROFILE_TEXT)
def test_profile_words_are_the_latin_words_the_regex_finds(text: str) -> None:
    """The C cut (Latin-1 bytes, translate, split) finds exactly the words of ``[A-Za-z\\u00c0-\\u024f]+``."""
    head = text.lower()
    words, _ = languages._profile_words(head)
    as_text = [w.decode("latin-1") if isinstance(w, bytes) else w for w in words]
    assert as_text == re.findall("[A-Za-z\u00c0-\u024f]+", head)


def _profile_by_loop(sample: str) -> str | None:
    """The profile as a plain loop over the words: one count per (word, language of its list)."""
    words = re.findall("[A-Za-z\u00c0-\u024f]+", sample[: languages.PROFILE_CHARS].lower())
    if len(words) < 8:
        return None
    hits = {lang: sum(w in languages.STOPWORDS[lang] for w in words) for lang in languages._PROFILE_LANGUAGES}
    (best, n), (_, second) = sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
    return None if n < 0.08 * len(words) or n <= 1.2 * second else best


_FUNCTION_WORDS = sorted({w for lang, ws in languages.STOPWORDS.items() if lang != "ru" for w in ws})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*_FUNCTION_WORDS, "Tabelle", "objet", "x", "über", "≥", "Łódź"]), max_size=400))
def test_the_packed_function_word_count_decides_as_a_plain_count(words: list[str]) -> None:
    """Every language's hits summed in one packed int decide as counting each language apart does,
    up to the sample's length (up to 400 words: many more than a 16-bit field could overflow on)."""
    sample = " ".join(words)
    assert languages._profile_language(sample) == _profile_by_loop(sample)
