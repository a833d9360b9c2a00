"""Per-language analysis: which language a note is in, and how one of its tokens becomes terms.

A note's language is, in order: its frontmatter ``lang`` / ``language``; else detected from its
text (the script for CJK, Hangul, Cyrillic, Greek, Arabic, Hebrew; for Latin script a cheap
profile of function words); else the vault default (``IndexConfig.language``, ``--language``).

A *token* is what the base FTS5 tokenizer (``unicode61 remove_diacritics 0``: case folded, cut
where FTS5 cuts) makes of a word. ``LanguageAnalysis.terms(token)`` turns it into index terms:

    base term   one per token, what BM25F counts at full weight. For a language with a Snowball
                stemmer: ``<lang>:<stem>`` with Latin diacritics folded (``de:uber``), so that
                every language's stems live apart and a query can be stemmed by each language of
                the index without one note matching twice. Without a stemmer: the folded token.
    exact term  ``=<token>`` (diacritics kept), only when the token differs from its base: lets a
                query word that matches a surface form exactly score above one that only shares
                the stem (``templater`` vs ``templates``) without doubling every posting.
    CJK         runs of Han, kana and Hangul become overlapping character bigrams (dictionary
                free); a one-character run stays a unigram; a run of three or more characters is
                also an exact term (``=東京都``). Other scripts inside the token are analysed as words.

Why per language and not one stemmer per vault, and the measurements behind the choices:
docs/architecture.md ("Languages").
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import snowballstemmer  # type: ignore[import-untyped]

from core.errors import UsageError

ANALYSIS_VERSION = 2
# language code -> Snowball algorithm (snowballstemmer; PyStemmer's C code when installed)
STEMMERS = {
    "ar": "arabic",
    "ca": "catalan",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "eu": "basque",
    "fi": "finnish",
    "fr": "french",
    "hu": "hungarian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "nl": "dutch",
    "no": "norwegian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "tr": "turkish",
}
CJK_LANGUAGES = ("ja", "ko", "zh")
# Languages accepted without a stemmer: their words are case folded and diacritics folded only.
PLAIN_LANGUAGES = (*CJK_LANGUAGES, "he", "hi", "th", "uk", "cs", "xx")
LANGUAGES = tuple(sorted({*STEMMERS, *PLAIN_LANGUAGES}))
_NAMES = {
    "english": "en",
    "german": "de",
    "deutsch": "de",
    "french": "fr",
    "francais": "fr",
    "français": "fr",
    "spanish": "es",
    "russian": "ru",
    "japanese": "ja",
    "chinese": "zh",
    "korean": "ko",
    "italian": "it",
    "portuguese": "pt",
    "dutch": "nl",
}

# Short function-word lists: the Latin-script detection profile, and the query words that do not
# decide a ranking on their own (the title/heading coverage bonus counts content words only).
STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "a an and are as at be but by can do does for from has have how i if in into is it its not of on or "
        "that the their there these this to was were what when where which who why will with you your".split()
    ),
    "de": frozenset(
        "aber als am an auch auf aus bei bis das dass dem den der des die diese dieser dieses ein eine einem "
        "einen einer eines es für hat ich ihr im in ist kann man mit nach nicht noch nur oder sich sie sind so "
        "über um und uns von vor wenn werden wie wir wird zu zum zur".split()
    ),
    "fr": frozenset(
        "au aux avec ce ces cette dans de des du elle en est et il ils je la le les leur lui mais ne nous on "
        "ou par pas pour qu que qui sa se ses son sont sur un une vous être".split()
    ),
    "es": frozenset(
        "al como con de del el en es esta este la las lo los más no para pero por que se sin su sus un una y".split()
    ),
    "it": frozenset("al che con da del della di e gli il in la le nel non per più si sono su un una uno".split()),
    "pt": frozenset(
        "ao as com como da das de do dos e em é na nas no nos não o os para pela pelo por que se um uma".split()
    ),
    "nl": frozenset("aan als bij dat de die een en het in is met niet of om op te van voor wat worden zijn".split()),
    "ru": frozenset(
        "а без бы в во все вы да для до если есть же за и из или как к ли на не но о об от по при с так "
        "то у что это я".split()
    ),
}

_PROFILE_LANGUAGES = tuple(lang for lang in STOPWORDS if lang != "ru")  # Latin script; Cyrillic is a script
_STOP_LANGS: dict[str, tuple[str, ...]] = {}
for _lang in _PROFILE_LANGUAGES:
    for _w in STOPWORDS[_lang]:
        _STOP_LANGS[_w] = (*_STOP_LANGS.get(_w, ()), _lang)
# A function word's languages packed in one int, 16 bits a language: the sum over a text's words is
# every language's count at once, added up in C (a sample has far fewer than 65536 words).
_HIT_BITS = 16
_HITS = {
    w: sum(1 << (_HIT_BITS * _PROFILE_LANGUAGES.index(lang)) for lang in langs) for w, langs in _STOP_LANGS.items()
}
_HITS_LATIN1 = {w.encode("latin-1"): hits for w, hits in _HITS.items()}  # every function word is Latin-1

_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff"
)


class _Lazy:
    """A regex compiled on first use. re's charset optimiser walks every code point of a class's
    ranges, so the CJK classes cost several ms each to compile; a process that meets no CJK-range
    character (every ASCII query: the callers test ``isascii()`` first) never compiles them."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    @property
    def re(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled


_CJK_RUN = _Lazy(f"[{_CJK}]+|[^{_CJK}]+")
_HAS_CJK = _Lazy(f"[{_CJK}]")
_KANA = _Lazy("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HANGUL = _Lazy("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af]")
_CYRILLIC = re.compile("[\u0400-\u04ff]")
_GREEK = re.compile("[\u0370-\u03ff]")
_ARABIC = re.compile("[\u0600-\u06ff]")
_HEBREW = re.compile("[\u0590-\u05ff]")
_LATIN = re.compile("[A-Za-z\u00c0-\u024f]")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")
DETECT_CHARS = 4000  # text looked at to detect a note's script
PROFILE_CHARS = 1500  # ... and its Latin-script function words
_NON_ASCII = re.compile("[\x00-\x7f]+")
_NOT_ASCII_LETTER = bytes(c for c in range(128) if not (65 <= c <= 90 or 97 <= c <= 122))
# Lower-cased text encoded as Latin-1 (an unencodable character as "?"): a-z and U+00C0-U+00FF stay,
# every other byte becomes a space, so bytes.split() cuts exactly where _LATIN_WORD does, as long as
# the text has no letter of U+0100-U+024F (_LATIN_EXTENDED).
_LATIN1_WORD_CUT = bytes(c if 97 <= c <= 122 or c >= 0xC0 else 32 for c in range(256))
_LATIN_EXTENDED = re.compile("[\u0100-\u024f]")
_CJK_WEIGHT = 3  # a CJK character counts as this many letters against a script's share
_SCRIPT_SHARE = 0.15  # a non-Latin script decides when it holds this share of the (weighted) letters
_PROFILE_MIN_WORDS = 8  # fewer Latin words than this: the vault default decides
_PROFILE_MIN_SHARE = 0.08  # a language's function words must make up this share of the words


def normalize_language(value: object) -> str | None:
    """A language code from a frontmatter value (``de``, ``de-DE``, ``German``), None if unknown."""
    if not isinstance(value, str) or not value.strip():
        return None
    low = value.strip().lower().replace("_", "-")
    code = _NAMES.get(low, low.split("-")[0])
    return code if code in LANGUAGES else None


def check_language(value: str) -> str:
    """``value`` as a language code for the vault default, else a ``UsageError``."""
    code = normalize_language(value)
    if code is None:
        raise UsageError(f"unknown language {value!r}: use one of {', '.join(LANGUAGES)}", language=value)
    return code


def _script_language(sample: str) -> str | None:
    if sample.isascii():  # most notes: no other script to weigh
        return None
    other = _NON_ASCII.sub("", sample)  # the regexes below then scan only the non-ASCII characters
    cjk = len(_HAS_CJK.re.findall(other))
    counts = {
        "cjk": cjk * _CJK_WEIGHT,
        "ru": len(_CYRILLIC.findall(other)),
        "el": len(_GREEK.findall(other)),
        "ar": len(_ARABIC.findall(other)),
        "he": len(_HEBREW.findall(other)),
    }
    latin = len(sample.encode("ascii", "ignore").translate(None, _NOT_ASCII_LETTER)) + len(_LATIN.findall(other))
    total = sum(counts.values()) + latin
    best = max(counts, key=lambda k: counts[k])
    if not total or counts[best] < _SCRIPT_SHARE * total:
        return None
    if best != "cjk":
        return best
    kana, hangul = len(_KANA.re.findall(other)), len(_HANGUL.re.findall(other))
    if hangul >= max(kana, cjk - kana - hangul):
        return "ko"
    return "ja" if kana >= 0.05 * cjk else "zh"


def _profile_words(head: str) -> tuple[list[bytes], dict[bytes, int]] | tuple[list[str], dict[str, int]]:
    """(the Latin words of lower-cased ``head`` as ``_LATIN_WORD`` finds them, the packed hits of
    function words in their type): cut in C where the text allows, several times faster."""
    if head.isascii() or not _LATIN_EXTENDED.search(head):
        return head.encode("latin-1", "replace").translate(_LATIN1_WORD_CUT).split(), _HITS_LATIN1
    return _LATIN_WORD.findall(head), _HITS


def _profile_language(sample: str) -> str | None:
    words, hits_of = _profile_words(sample[:PROFILE_CHARS].lower())
    if len(words) < _PROFILE_MIN_WORDS:
        return None
    packed = sum(map(hits_of.__getitem__, filter(hits_of.__contains__, words)))  # type: ignore[arg-type]
    mask = (1 << _HIT_BITS) - 1
    hits = {lang: (packed >> (_HIT_BITS * i)) & mask for i, lang in enumerate(_PROFILE_LANGUAGES)}
    ranked = sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))
    (best, n), (_, second) = ranked[0], ranked[1]
    if n < _PROFILE_MIN_SHARE * len(words) or n <= 1.2 * second:
        return None
    return best


def detect_language(text: str, default: str) -> str:
    """The language of ``text`` by script, then by function-word profile, else ``default``."""
    sample = text[:DETECT_CHARS]
    return _script_language(sample) or _profile_language(sample) or default


def note_language(frontmatter_value: object, text: str, default: str) -> str:
    """Frontmatter ``lang``/``language`` if it names a language, else detected, else ``default``."""
    return normalize_language(frontmatter_value) or detect_language(text, default)


def fold_latin(text: str) -> str:
    """Latin letters without their diacritics (``über`` -> ``uber``); other scripts unchanged, but
    Cyrillic ``ё`` -> ``е`` (as Russian text mostly writes it)."""
    if text.isascii():
        return text
    out = []
    for ch in text:
        if "\u00c0" <= ch <= "\u024f":
            out.append("".join(c for c in unicodedata.normalize("NFD", ch) if not unicodedata.combining(c)))
        elif ch == "ё":
            out.append("е")
        else:
            out.append(ch)
    return "".join(out)


def cjk_grams(run: str) -> list[str]:
    """Overlapping character bigrams of a CJK run (a one-character run stays one unigram)."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def script_runs(token: str) -> list[str]:
    """A token cut into runs of CJK and of other characters (``東京tower`` -> ``東京``, ``tower``)."""
    if token.isascii():  # what the regex finds in it, without compiling it
        return [token] if token else []
    return _CJK_RUN.re.findall(token)


def has_cjk(text: str) -> bool:
    return not text.isascii() and _HAS_CJK.re.search(text) is not None


def is_cjk_run(run: str) -> bool:
    return bool(run) and not run.isascii() and _HAS_CJK.re.match(run) is not None


@dataclass(frozen=True)
class LanguageAnalysis:
    """How tokens of one language become terms (see the module docstring)."""

    language: str

    @property
    def algorithm(self) -> str | None:
        return STEMMERS.get(self.language)

    def stemmer(self) -> snowballstemmer.stemmer | None:
        return _stemmer(self.algorithm) if self.algorithm else None

    def base(self, tokens: list[str]) -> list[str]:
        """The base term of each non-CJK token (stemmed and namespaced, or folded)."""
        stem = self.stemmer()
        if stem is None:
            return [fold_latin(t) for t in tokens]
        prefix = self.language + ":"
        return [prefix + (s if s.isascii() else fold_latin(s)) for s in stem.stemWords(tokens)]

    def terms_of(self, tokens: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """token -> its terms: the base term (and the exact term when it differs), or CJK grams."""
        tokens = list(tokens)
        out: dict[str, tuple[str, ...]] = {}
        plain = [t for t in tokens if t.isascii() or not has_cjk(t)]
        ns = len(self.language) + 1 if self.algorithm else 0
        for tok, base in zip(plain, self.base(plain)):
            out[tok] = (base,) if base[ns:] == tok else (base, "=" + tok)
        if len(out) == len(tokens):
            return out
        for tok in tokens:
            if tok not in out:
                terms: list[str] = []
                for run in script_runs(tok):
                    if is_cjk_run(run):
                        terms += cjk_grams(run)
                        if len(run) > 2:  # the whole run too, as FTS5 keeps it: a heading found verbatim
                            terms.append("=" + run)
                    else:
                        terms += self.terms_of([run])[run]
                out[tok] = tuple(terms)
        return out


_STEMMERS = threading.local()  # a stemmer keeps state while it stems ("must not be called concurrently")


def _stemmer(algorithm: str) -> snowballstemmer.stemmer:
    """This thread's stemmer for ``algorithm`` (PyStemmer's objects are one thread at a time)."""
    mine: dict[str, snowballstemmer.stemmer] | None = getattr(_STEMMERS, "by_algorithm", None)
    if mine is None:
        mine = _STEMMERS.by_algorithm = {}
    found = mine.get(algorithm)
    if found is None:
        found = mine[algorithm] = snowballstemmer.stemmer(algorithm)
    return found


def analysis_identity(default: str) -> str:
    """What the index terms depend on: a change means a rebuild (part of ``IndexConfig.identity``)."""
    import hashlib  # the build's identity only, not the read path

    backend = type(_stemmer("english")).__module__
    stop = hashlib.sha256(repr(sorted((k, sorted(v)) for k, v in STOPWORDS.items())).encode()).hexdigest()[:12]
    langs = ",".join(f"{k}={STEMMERS.get(k, 'plain')}" for k in LANGUAGES)
    return f"v{ANALYSIS_VERSION};default={default};stemmer={backend};stop={stop};fold=latin;cjk=bigram;{langs}"
