"""A query's words -> weighted index terms: the analysis of every language of the index, exact
forms, prefixes, stem variants, compound parts, CJK unigrams and typo corrections.

Every word is analysed in each language the index holds notes in (meta ``languages``): its base
term per language (stems are namespaced, so a note matches once per word) at full weight, and
its exact form (``=word``) as a bonus when it differs from its stem. Then, against the
generation's own vocabulary (``Vocabulary``, built once per SparseIndex):

    prefix      longer vocabulary words that start with the word (``worktree`` ->
                ``worktrees``): PREFIX_WEIGHT, low, and not highlighted. A word that is not in the
                vocabulary also gets everything below, at the higher *_MISSING_WEIGHT s:
    prefix      ... words starting with it (``worktr`` -> ``worktree``), only when there is none with
                one of its stems; so is the query's LAST word when it is rarer than a word it starts
                (a word being typed: ``cheat`` -> ``cheatsheet``), its completions that are some
                visible note's name first (``name_starts``: core.modes.lexical lifts those notes);
    variant     stems that are a proper prefix of the word's stem in the same stemmed language, at
                most two letters shorter (German ``konten`` -> ``kont``..., ``konto`` of ``Konten``:
                Snowball does not merge them); none for a language without a stemmer;
    subword     vocabulary words that end with the word (compound heads: ``sicherung`` ->
                ``dateisicherung``), and the word split into two vocabulary words of one language
                (``graphansicht`` -> ``graph`` + ``ansicht``; not German + English parts).
    cjk_unigram a one-character CJK query word, which the bigram terms cannot serve, matches the
                bigrams that hold it.
    typo        a word of >= TYPO_MIN_CHARS letters that nothing above finds is corrected to
                vocabulary words one edit away (insert, delete, substitute, swap), the most
                frequent first, weighted by document frequency, below prefixes.

Identifiers (a piece of the query made of several words, ``live/live#2181``) and numbers are
never expanded. Nor is a word longer than MAX_EXPANDED_CHARS that is not in the vocabulary: the typo
candidates of a word grow with the square of its length (4,000 characters: 844 MiB), so such a word
is unmatched and says so (an expansion of kind ``skipped``, reason ``word_too_long``). When a query has more stop words (of the index's languages) than content words,
its stop words keep STOP_WEIGHT of their BM25 score and STOP_COVER of their coverage share.
Everything expanded is reported (``QueryAnalysis.expansions`` -> ``query_expansions``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.ranking.analysis import _TERM_WORD, analyzer_for
from core.ranking.analysis import LANGUAGE_TOKENIZER as _BASE_TOKENIZER
from core.ranking.languages import STOPWORDS, LanguageAnalysis, cjk_grams, has_cjk, is_cjk_run, script_runs
from core.ranking.query import MAX_QUERY_TERMS
from core.ranking.vocabulary import VOCABULARY_ARRAYS, Vocabulary, vocabulary, vocabulary_arrays  # noqa: F401

# A query with more stop words than content words (``how do I embed a note``) gives its stop words
# this share of their BM25 score and of their idf in the title/heading coverage bonus; with fewer
# they cannot decide a ranking on their own and keep full weight (``Upgrade your CLI``: measured on
# the Dendron dev set, where damping them there too costs 0.003-0.007 nDCG@10).
STOP_WEIGHT = 0.3
STOP_COVER = 0.25
EXACT_WEIGHT = 0.1  # the exact surface form, on top of its stem
PREFIX_WEIGHT = 0.02  # a longer vocabulary word, when the word itself is in the vocabulary
PREFIX_MISSING_WEIGHT = 0.6  # ... when it is not (``worktr``)
VARIANT_MISSING_WEIGHT = 0.3  # a shorter stem, for a word not in the vocabulary
SUBWORD_MISSING_WEIGHT = 0.3  # a compound holding a word not in the vocabulary; the parts of a split one
CJK_UNIGRAM_WEIGHT = 1.0  # a one-character query: the bigrams that hold the character
CJK_UNIGRAM_IN_QUERY_WEIGHT = 0.1  # a one-character word among others (often a particle: 의, の, 的)
CJK_EXACT_WEIGHT = 0.5  # a whole run of CJK characters found as one run
TYPO_WEIGHT = 0.5  # times df / the best candidate's df; below PREFIX_MISSING_WEIGHT
SPLIT_EXPANSION_WEIGHT = True
PREFIX_MIN_CHARS = 3
FOUND_PREFIX_MIN_CHARS = 4  # a word in the vocabulary is expanded as a prefix from this length on,
FOUND_PREFIX_MAX_WORDS = 4  # in a query of at most this many content words (a name being typed, not a sentence)
# The last word of a query is expanded as a word start at PREFIX_MISSING_WEIGHT when it is rare: in fewer
# notes than this share of the notes of the most frequent longer word it starts (``cheat`` -> ``cheatsheet``).
RARE_PREFIX_SHARE = 1.0
MAX_CANDIDATES = 256  # vocabulary words looked at per word and kind (in sorted order)
SUBWORD_MIN_CHARS = 4
TYPO_MIN_CHARS = 5
MAX_EXPANSIONS = 6  # per word and kind, the most frequent first
MAX_CJK_UNIGRAM = 32
MAX_EXPANDED_CHARS = 64  # longer than German compounds and most identifiers; see the module docstring
_WORD = re.compile(r"[^\W_]+")


@dataclass
class QueryAnalysis:
    """Distinct terms with their weight, coverage share and kind; what was expanded and what nothing serves."""

    terms: list[str] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    cover: list[float] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)  # the query's tokens (snippet highlighting)
    expansions: list[dict[str, Any]] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)  # tokens no index term serves
    quiet: set[str] = field(default_factory=set)  # low-weight expansions: not highlighted in snippets
    # the last word's word-start completions that are some visible note's name (``name_starts``)
    name_starts: list[str] = field(default_factory=list)
    name_word: set[str] = field(default_factory=set)  # the base terms of the word they start
    stop: set[str] = field(default_factory=set)  # the tokens that are stop words of the index's languages
    stems: dict[str, str] = field(default_factory=dict)  # token -> its shortest stem in the index's languages

    @property
    def cjk_only(self) -> bool:
        """Every query word is a run of CJK characters: a look-up by bigrams, with no word boundary."""
        return bool(self.words) and all(is_cjk_run(w) and len(script_runs(w)) == 1 for w in self.words)

    def add(self, term: str, weight: float, cover: float, kind: str) -> None:
        if term in self.terms:  # one weight per term: the strongest reading wins
            i = self.terms.index(term)
            if weight > self.weights[i]:
                self.weights[i], self.kinds[i] = weight, kind
            self.cover[i] = max(self.cover[i], cover)
            return
        if len(self.terms) < MAX_QUERY_TERMS * 4:
            self.terms.append(term)
            self.weights.append(weight)
            self.cover.append(cover)
            self.kinds.append(kind)


def _bm25_idf(df: int, n_docs: int) -> float:
    """``scoring.bm25_idf`` of one document frequency."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


def _edits(word: str, alphabet: set[str]) -> set[str]:
    """Every string one insert, delete, substitution or adjacent swap away from ``word``."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits if b for c in alphabet}
    out |= {a + c + b for a, b in splits for c in alphabet}
    out.discard(word)
    return out


def _script_alphabet(word: str, chars: set[str]) -> set[str]:
    """The vocabulary's letters of the word's script block (Latin, Cyrillic, ...)."""
    block = ord(word[0]) >> 8 if not word[0].isascii() else 0
    latin = block in (0, 1, 2)
    return {c for c in chars if c.isalpha() and ((ord(c) >> 8 in (0, 1, 2)) if latin else (ord(c) >> 8 == block))}


class QueryAnalyzer:
    """Analyses query text for one generation: its languages, its vocabulary."""

    def __init__(
        self,
        term_id: Mapping[str, int],
        vocab: Vocabulary,
        languages: Sequence[str],
        df: Callable[[int], int] | None = None,
        names: Callable[[int], int] | None = None,
    ) -> None:
        """``df(term id)``: in how many notes the caller may see the term occurs (default: all notes).
        Expansions and "is this word in the vocabulary" use it, so that nothing the response
        reports (``expansions``, ``unmatched``) depends on notes the caller may not see.
        ``names(term id)``: in how many of those notes' names (title field) it occurs (default: none
        known): the last word's word starts that are names come first (``name_starts``)."""
        self.term_id = term_id
        self.vocab = vocab
        self.df = df or (lambda t: int(vocab.df[t]))
        self.names = names
        self.languages = [LanguageAnalysis(lang) for lang in languages] or [LanguageAnalysis("en")]
        self.stop = frozenset().union(*(STOPWORDS.get(lang, frozenset()) for lang in languages))
        self._bases: dict[str, list[str]] = {}  # token -> its base term per language (analyse)
        self._short = False

    def analyse(self, text: str) -> QueryAnalysis:
        out = QueryAnalysis()
        base = analyzer_for(_BASE_TOKENIZER)
        pieces = text.split()
        identifiers = {w for p in pieces if len(parts := _WORD.findall(p.lower())) >= 2 for w in parts}
        words = _TERM_WORD.findall(text)
        mapping = base.map_words(words)
        tokens = list(dict.fromkeys(t for w in words for t in mapping[w]))[:MAX_QUERY_TERMS]
        out.stop = {t for t in tokens if t in self.stop}
        n_stop = len(out.stop)
        self._short = len(tokens) - n_stop <= FOUND_PREFIX_MAX_WORDS
        damp = n_stop > len(tokens) - n_stop > 0  # more stop words than content words, and some content
        plain = [t for t in tokens if not has_cjk(t)]  # stemmed once per language for the whole query
        stems = [la.base(plain) for la in self.languages]
        self._bases = {tok: list(dict.fromkeys(s[i] for s in stems)) for i, tok in enumerate(plain)}
        out.stems = {tok: min((surface(b) for b in bases), key=len) for tok, bases in self._bases.items() if bases}
        for i, tok in enumerate(tokens):
            out.words.append(tok)
            if has_cjk(tok):
                self._cjk(tok, out, alone=len(tokens) == 1)
            else:
                stop, last = tok in self.stop, i == len(tokens) - 1
                literal = tok in identifiers or tok.isdigit()
                self._word(tok, out, literal=literal, stop=stop, damp=stop and damp, last=last)
        return out

    def _known(self, term: str) -> bool:
        return term in self.term_id and self.df(self.term_id[term]) > 0

    def _cjk(self, tok: str, out: QueryAnalysis, *, alone: bool) -> None:
        for run in script_runs(tok):
            if not is_cjk_run(run):
                self._word(run, out, literal=False, stop=False)
                continue
            grams = cjk_grams(run)
            for g in grams:
                out.add(g, 1.0, 1.0, "base")
            if len(run) > 2:
                out.add("=" + run, CJK_EXACT_WEIGHT, 0.0, "exact")
            if len(run) == 1:
                found = self.vocab.best([*self.vocab.starting(run), *self.vocab.ending(run)], MAX_CJK_UNIGRAM, self.df)
                found = [(w, t, d) for w, t, d in found if w != run]
                weight = CJK_UNIGRAM_WEIGHT if alone else CJK_UNIGRAM_IN_QUERY_WEIGHT
                for _, tid, _ in found:
                    out.add(self.vocab.name[tid], weight, 1.0 / max(len(found), 1), "cjk_unigram")
                if found:
                    out.expansions.append({"word": run, "kind": "cjk_unigram", "to": [w for w, _, _ in found]})
            if not any(self._known(g) for g in grams) and not (len(run) == 1 and out.expansions):
                out.unmatched.append(run)

    def _word(
        self, tok: str, out: QueryAnalysis, *, literal: bool, stop: bool, damp: bool = False, last: bool = False
    ) -> None:
        cover, share = (STOP_COVER, STOP_WEIGHT) if damp else (1.0, 1.0)
        bases = self._bases.get(tok) or list(dict.fromkeys(la.base([tok])[0] for la in self.languages))
        # a word counts once in the coverage bonus: its stems in the index's languages share it by df
        dfs = [self.df(self.term_id[b]) if b in self.term_id else 0 for b in bases]
        total = sum(dfs)
        # ... and its idf is over every note that holds it in any language, not within one namespace
        # (a few notes detected as another language must not get a rare-term idf for common words)
        n = self.vocab.n_docs
        word_idf = _bm25_idf(total, n)  # scoring.bm25_idf for one value, without numpy's per-call cost
        for b, df in zip(bases, dfs):
            term_idf = _bm25_idf(df, n)
            weight = share * (word_idf / term_idf if df and term_idf > 0 else 1.0)
            out.add(b, weight, cover * (df / total if total else 1.0 / len(bases)), "base")
        keys = {b[3:] if b[2:3] == ":" else b for b in bases}
        if keys != {tok}:
            out.add("=" + tok, EXACT_WEIGHT, 0.0, "exact")
        found = any(self._known(b) for b in bases) or self._known("=" + tok)
        if literal or stop:
            if not found:
                out.unmatched.append(tok)
            return
        if found and not (last and self._rare(tok, sum(dfs))):
            # the word is in the vocabulary: only longer words it is a prefix of, at a low weight
            if len(tok) >= FOUND_PREFIX_MIN_CHARS and self._short:
                starts = [w for w in self.vocab.starting(tok)[:MAX_CANDIDATES] if w != tok and w not in keys]
                self._expand(tok, out, starts, "prefix", PREFIX_WEIGHT, quiet=True)
            return
        if len(tok) > MAX_EXPANDED_CHARS:
            _skip_long(tok, out)
            return
        served = False
        if len(tok) >= PREFIX_MIN_CHARS:
            served |= self._expand(tok, out, self._starts(tok, keys), "prefix", PREFIX_MISSING_WEIGHT, names=last)
            if out.name_starts:
                out.name_word = set(bases)
            if found:  # a rare last word: a word being typed; its own matches stay above (weight 1)
                return
            variants = self._variants(bases)
            served |= self._expand(tok, out, variants, "variant", VARIANT_MISSING_WEIGHT)
        if len(tok) >= SUBWORD_MIN_CHARS:
            ends = [w for w in self.vocab.ending(tok)[:MAX_CANDIDATES] if len(w) >= len(tok) + 3]
            served |= self._expand(tok, out, ends, "subword", SUBWORD_MISSING_WEIGHT)
            served |= self._expand(tok, out, self._split(tok), "subword", SUBWORD_MISSING_WEIGHT, each=True)
        if not served and len(tok) >= TYPO_MIN_CHARS:
            alphabet = _script_alphabet(tok, self.vocab.chars)
            v = self.vocab  # only the edits that are vocabulary words can be chosen (Vocabulary.best)
            edits = sorted(v.known(_edits(tok, alphabet)))
            served = self._expand(tok, out, edits, "typo", TYPO_WEIGHT, limit=3, by_df=True)
        if not served:
            out.unmatched.append(tok)

    def _starts(self, tok: str, keys: set[str]) -> list[str]:
        """Vocabulary words that start with ``tok`` (a word being typed); only when there is none,
        those that start with one of its stems (``kontos`` -> ``konto``)."""
        longer = [w for w in self.vocab.starting(tok)[:MAX_CANDIDATES] if w != tok and w not in keys]
        if longer:
            return longer
        stems = {w for k in keys if len(k) >= PREFIX_MIN_CHARS and k != tok for w in self.vocab.starting(k)}
        return sorted(stems - {tok, *keys})[:MAX_CANDIDATES]

    def _variants(self, bases: list[str]) -> list[str]:
        """Shorter stems of the word's stem in a language with a stemmer, by at most two letters,
        that the same language's notes hold (``de:konten`` -> ``de:kont``): a language without one
        (its words only folded: English words in a Chinese vault) has no variants (``ownershp`` is a
        typo of ``ownership``, not a form of ``owners``)."""
        out = []
        for b in bases:
            if b[2:3] != ":":
                continue
            key = b[3:]
            for i in range(max(SUBWORD_MIN_CHARS, len(key) - 2), len(key)):
                if self._known(b[:3] + key[:i]):
                    out.append(key[:i])
        return list(dict.fromkeys(out))

    def _same_language(self, head: str, right: str) -> bool:
        """Do two parts of a compound have base terms in one language (``kündigung`` + ``frist``, not
        German ``kündigung`` + English ``first``)?"""
        return bool(self._base_languages(head) & self._base_languages(right))

    def _base_languages(self, key: str) -> set[str]:
        """The languages of the index in whose analysis a vocabulary word is a word of some note
        ('' for every language without a stemmer: their terms share one namespace)."""
        return {la.language if la.algorithm else "" for la in self.languages if self._known(la.base([key])[0])}

    def _rare(self, tok: str, df: int) -> bool:
        """Is a vocabulary word rarer than a longer word it starts (``cheat``: ``cheatsheet``)? Then
        the word is more likely being typed than meant (``RARE_PREFIX_SHARE``)."""
        if len(tok) < FOUND_PREFIX_MIN_CHARS:
            return False
        longer = [w for w in self.vocab.starting(tok)[:MAX_CANDIDATES] if w != tok]
        best = self.vocab.best(longer, 1, self.df)
        return bool(best) and df * RARE_PREFIX_SHARE < best[0][2]

    def _split(self, tok: str) -> list[str]:
        """Two vocabulary words (a linking ``s`` allowed) that make up ``tok``, the most frequent pair."""
        best: tuple[int, list[str]] = (0, [])
        v = self.vocab
        for i in range(3, len(tok) - 2):
            left, right = tok[:i], tok[i:]
            for head in (left, left[:-1] if left.endswith("s") and len(left) > 4 else ""):
                pair = (v.surface(head, self.df), v.surface(right, self.df)) if head else (None, None)
                if pair[0] is not None and pair[1] is not None and self._same_language(head, right):
                    score = min(self.df(pair[0]), self.df(pair[1]))
                    if score > best[0]:
                        best = (score, [head, right])
        return best[1]

    def _expand(
        self,
        tok: str,
        out: QueryAnalysis,
        candidates: Sequence[str],
        kind: str,
        weight: float,
        *,
        limit: int = MAX_EXPANSIONS,
        by_df: bool = False,
        each: bool = False,
        quiet: bool = False,
        names: bool = False,
    ) -> bool:
        # the query's own terms that some note holds: a candidate sharing one adds nothing new
        own = {t for t, k in zip(out.terms, out.kinds) if k in ("base", "exact") and self._known(t)}
        ranked = self.vocab.best(candidates, len(candidates), self.df)
        in_names, named = self.names, {}
        if names and in_names is not None:  # the last word's word starts that are names come first
            for f in ranked:  # a word's terms in some name: its surface, or its base in a language
                ids = [t for t in dict.fromkeys([f[1], *self.vocab.base_ids(f[0])]) if in_names(t) > 0]
                if ids:
                    named[f[1]] = ids
            ranked.sort(key=lambda f: f[1] not in named)  # stable: by df within each group
        found: list[tuple[str, int, int]] = []
        taken: set[str] = set()  # base terms of the words chosen so far: one form per word
        for f in ranked:
            bases = {la.base([f[0]])[0] for la in self.languages} if not has_cjk(f[0]) else {f[0]}
            bases |= {self.vocab.name[t] for t in self.vocab.base_ids(f[0]) if t in self.vocab.name}
            if self.vocab.name[f[1]] not in own and not bases & own and not bases & taken:
                taken |= bases
                found.append(f)
                if len(found) == limit and not each:
                    break
        if not found:
            return False
        top = max(d for _, _, d in found)
        split = len(found) if SPLIT_EXPANSION_WEIGHT and not each else 1  # a word's expansions share its weight
        for _, tid, df in found:
            w = weight * (df / top if by_df else 1.0) / split
            out.add(self.vocab.name[tid], w, 0.0, kind)
            if quiet:
                out.quiet.add(self.vocab.name[tid])
            for t in named.get(tid, []) if not quiet else []:  # the name's own term is matched too
                out.add(self.vocab.name[t], w, 0.0, kind)
                out.name_starts.append(self.vocab.name[t])
        out.expansions.append({"word": tok, "kind": kind, "to": [w for w, _, _ in found]})
        return True


def surface(term: str) -> str:
    """A term as text can show it: without ``=`` or its language namespace (snippet highlighting)."""
    if term.startswith("="):
        return term[1:]
    return term[3:] if term[2:3] == ":" else term


def _skip_long(tok: str, out: QueryAnalysis) -> None:
    """A word over MAX_EXPANDED_CHARS that the vocabulary lacks: unmatched, and said not to be expanded
    (typo edits grow with the square of its length: one request could take the server's memory)."""
    out.expansions.append(
        {
            "word": tok[:MAX_EXPANDED_CHARS] + "…",
            "kind": "skipped",
            "reason": "word_too_long",
            "chars": len(tok),
            "max_chars": MAX_EXPANDED_CHARS,
            "to": [],
        }
    )
    out.unmatched.append(tok)
