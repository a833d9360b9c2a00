"""Synthetic vaults for the scaling study, made of real text.

Sentences, headings and titles come from the real corpora (SciFact abstracts, Dendron's
docs, PowerShell's reference), frontmatter stripped and code/tables dropped. Each
synthetic note gets a real title, frontmatter (title, type, tags, created/updated dates,
classification ``public``/``lan``), a few ``## headings`` and 3-15 paragraphs of shuffled
real sentences. Wikilinks are rewired: every note draws its out-degree from the real
Dendron link graph's out-degree distribution and links to that many random other
synthetic notes, so link density is realistic while every link resolves.

Output is a pure function of ``(n_notes, seed)`` and the corpora: one ``random.Random``
drives every choice, and the corpora are read in sorted order. Notes are spread over
folders of at most :data:`FOLDER_SIZE` files.

CLI: ``python -m bench.synth OUT N [--seed S]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import random
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.baselines import split_frontmatter
from bench.common import DATA_DIR

FOLDER_SIZE = 1000
DEFAULT_SOURCES: tuple[Path, ...] = (
    DATA_DIR / "scifact" / "vault",
    DATA_DIR / "dendron" / "vault",
    DATA_DIR / "powershell-docs" / "reference",
)
LINK_GRAPH_SOURCE = DATA_DIR / "dendron" / "vault"
NOTE_TYPES = ("note", "note", "note", "reference", "reference", "howto", "journal", "meeting", "project")
TAGS = (
    "research",
    "biology",
    "medicine",
    "genetics",
    "cancer",
    "immunology",
    "neuroscience",
    "powershell",
    "scripting",
    "windows",
    "security",
    "networking",
    "cli",
    "docs",
    "dendron",
    "howto",
    "draft",
    "todo",
    "review",
    "archive",
    "idea",
    "meeting",
    "project",
    "reading",
    "reference",
    "config",
    "release",
    "community",
    "workflow",
    "tools",
)
_EPOCH = dt.date(2015, 1, 1)

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_WIKILINK = re.compile(r"!?\[\[([^\]|#]*)(?:#[^\]|]*)?(?:\|([^\]]*))?\]\]")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_OUT_LINK = re.compile(r"(?<!!)\[\[")
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class TextPool:
    """The real material synthetic notes are drawn from."""

    sentences: tuple[str, ...]
    headings: tuple[str, ...]  # unique heading texts, sorted
    titles: tuple[str, ...]  # unique note titles, sorted
    out_degrees: tuple[int, ...]  # wikilink out-degree of every note of the link-graph corpus


# ---------------------------------------------------------------- reading the corpora


def _md_files(folder: Path) -> list[Path]:
    """Every ``*.md`` under ``folder`` in sorted path order (determinism depends on it)."""
    found = [Path(root, name) for root, _dirs, files in os.walk(folder) for name in files if name.endswith(".md")]
    return sorted(found)


def _clean_inline(text: str) -> str:
    """Drop Markdown/wiki link syntax (keep the visible text) and emphasis markers."""
    text = _WIKILINK.sub(lambda m: (m.group(2) or m.group(1)).strip(), text)
    text = _MD_LINK.sub(lambda m: m.group(1), text)
    return text.replace("**", "").replace("__", "")


def prose_blocks(body: str) -> tuple[list[str], list[str]]:
    """Split a note body into prose paragraphs (lines joined) and heading texts.

    Code fences, tables, HTML lines and headings are not prose; hard-wrapped lines of one
    paragraph are joined with spaces.
    """
    paragraphs: list[str] = []
    headings: list[str] = []
    current: list[str] = []
    in_fence = False
    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else _HEADING.match(line)
        stripped = line.strip()
        if in_fence or heading or not stripped or stripped[0] in "|<>":
            if heading:
                headings.append(_clean_inline(heading.group(2)).strip())
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        current.append(_LIST_MARK.sub("", stripped))
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs, headings


def split_sentences(paragraph: str, *, min_len: int = 25, max_len: int = 500) -> list[str]:
    """Sentences of a prose paragraph (split after . ! ? before a capital), length-filtered."""
    out = []
    for sentence in _SENTENCE_END.split(_clean_inline(paragraph)):
        sentence = " ".join(sentence.split())
        if min_len <= len(sentence) <= max_len and sentence[-1] in ".!?":
            out.append(sentence)
    return out


def wikilink_out_degree(body: str) -> int:
    """Number of ``[[...]]`` links (embeds ``![[...]]`` excluded) outside code fences."""
    count = 0
    in_fence = False
    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            count += len(_OUT_LINK.findall(line))
    return count


@functools.lru_cache(maxsize=4)
def load_pool(sources: tuple[Path, ...] = DEFAULT_SOURCES, link_source: Path = LINK_GRAPH_SOURCE) -> TextPool:
    """Read the corpora once per process into a :class:`TextPool` (cached: it takes seconds)."""
    sentences: list[str] = []
    headings: set[str] = set()
    titles: set[str] = set()
    degrees: list[int] = []
    for folder in sources:
        files = _md_files(folder)
        if not files:
            raise FileNotFoundError(f"no *.md files under {folder}")
        for path in files:
            title, body = split_frontmatter(path.read_text(encoding="utf-8"))
            paragraphs, heads = prose_blocks(body)
            for paragraph in paragraphs:
                sentences.extend(split_sentences(paragraph))
            headings.update(h for h in heads if 3 <= len(h) <= 80)
            if title and len(title) <= 120:
                titles.add(" ".join(title.split()))
            if folder == link_source:
                degrees.append(wikilink_out_degree(body))
    if not degrees:
        raise ValueError(f"link-graph source {link_source} is not among the sources")
    return TextPool(tuple(sentences), tuple(sorted(headings)), tuple(sorted(titles)), tuple(degrees))


# ---------------------------------------------------------------- composing notes


def note_stem(index: int, title: str) -> str:
    """Unique, readable file stem: the title's slug (at most 40 chars) and the note number."""
    slug = _SLUG.sub("-", title.lower()).strip("-")[:40].rstrip("-") or "note"
    return f"{slug}-{index:06d}"


def note_rel_path(index: int, stem: str) -> str:
    """Folder ``dNNN/`` of at most FOLDER_SIZE notes, then ``stem.md``."""
    return f"d{index // FOLDER_SIZE:03d}/{stem}.md"


def _frontmatter(rng: random.Random, title: str) -> str:
    created = _EPOCH + dt.timedelta(days=rng.randrange(3650))
    updated = created + dt.timedelta(days=rng.randrange(1000))
    tags = sorted(rng.sample(TAGS, rng.randint(0, 4)))
    classification = "lan" if rng.random() < 0.15 else "public"
    return (
        f"---\ntitle: {json.dumps(title)}\ntype: {rng.choice(NOTE_TYPES)}\n"
        f"tags: [{', '.join(tags)}]\ncreated: {created.isoformat()}\nupdated: {updated.isoformat()}\n"
        f"classification: {classification}\n---\n"
    )


def _paragraphs(rng: random.Random, pool: TextPool) -> list[str]:
    """3-15 paragraphs of 1-6 random real sentences each."""
    return [" ".join(rng.choices(pool.sentences, k=rng.randint(1, 6))) for _ in range(rng.randint(3, 15))]


def _add_links(
    rng: random.Random, paragraphs: list[str], index: int, stems: Sequence[str], titles: Sequence[str], degree: int
) -> None:
    """Append ``degree`` wikilinks to random other notes at the ends of random paragraphs."""
    n = len(stems)
    for _ in range(min(degree, n - 1)):
        target = rng.randrange(n - 1)
        target += target >= index  # never link to itself
        link = f"[[{stems[target]}]]" if rng.random() < 0.6 else f"[[{stems[target]}|{titles[target]}]]"
        slot = rng.randrange(len(paragraphs))
        paragraphs[slot] += f" See {link}."


def compose_note(rng: random.Random, pool: TextPool, index: int, stems: Sequence[str], titles: Sequence[str]) -> str:
    """The full text of synthetic note ``index``: frontmatter, paragraphs, headings, links."""
    paragraphs = _paragraphs(rng, pool)
    _add_links(rng, paragraphs, index, stems, titles, rng.choice(pool.out_degrees))
    n_headings = rng.randint(1, min(4, len(paragraphs) - 1))
    heading_at = set(rng.sample(range(1, len(paragraphs)), n_headings))
    parts = [_frontmatter(rng, titles[index])]
    for i, paragraph in enumerate(paragraphs):
        if i in heading_at:
            parts.append(f"## {rng.choice(pool.headings)}\n\n")
        parts.append(paragraph + "\n\n")
    return "".join(parts)


@dataclass(frozen=True)
class SynthSummary:
    """What :func:`make_vault` wrote."""

    out_dir: Path
    notes: int
    folders: int
    links: int
    bytes: int
    seconds: float


def make_vault(out_dir: Path, n_notes: int, seed: int = 0, *, pool: TextPool | None = None) -> SynthSummary:
    """Write ``n_notes`` synthetic notes under ``out_dir`` (created; must be empty or absent)."""
    if n_notes < 2:
        raise ValueError("a synthetic vault needs at least 2 notes (links go to other notes)")
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} is not empty")
    start = time.perf_counter()
    pool = pool or load_pool()
    rng = random.Random(seed)
    titles = [rng.choice(pool.titles) for _ in range(n_notes)]
    stems = [note_stem(i, t) for i, t in enumerate(titles)]
    total_bytes = links = 0
    for folder in range((n_notes + FOLDER_SIZE - 1) // FOLDER_SIZE):
        (out_dir / f"d{folder:03d}").mkdir(parents=True)
    for i in range(n_notes):
        data = compose_note(rng, pool, i, stems, titles).encode("utf-8")
        links += data.count(b"[[")
        total_bytes += len(data)
        with open(out_dir / note_rel_path(i, stems[i]), "wb") as fh:
            fh.write(data)
    folders = (n_notes + FOLDER_SIZE - 1) // FOLDER_SIZE
    return SynthSummary(out_dir, n_notes, folders, links, total_bytes, time.perf_counter() - start)


def cached_vault(
    work_dir: Path, n_notes: int, seed: int = 0, *, pool: TextPool | None = None
) -> tuple[Path, dict[str, Any]]:
    """The synthetic vault of ``(n_notes, seed)`` under ``work_dir``, generated once and reused.

    A vault is generated into a staging folder and renamed into place with a ``synth.json``
    beside it (its :class:`SynthSummary`), so an interrupted generation is never reused:
    only a folder whose summary exists counts. Returns ``(vault_dir, summary dict)``; the
    summary's ``cached`` says whether this call reused an earlier one. ``pool`` is for tests
    (a small text pool); it is not part of the cache key, so use a separate ``work_dir``.
    """
    work_dir = Path(work_dir)
    home = work_dir / f"synth-{n_notes}-seed{seed}"
    marker = home / "synth.json"
    if marker.is_file():
        return home / "vault", {**json.loads(marker.read_text(encoding="utf-8")), "cached": True}
    if home.exists():
        shutil.rmtree(home)  # an interrupted earlier generation: no marker, so never trusted
    staging = work_dir / f".staging-synth-{n_notes}-seed{seed}-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    summary = make_vault(staging / "vault", n_notes, seed, pool=pool)
    data = {
        "notes": summary.notes,
        "folders": summary.folders,
        "links": summary.links,
        "bytes": summary.bytes,
        "seconds": round(summary.seconds, 2),
        "seed": seed,
    }
    (staging / "synth.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.rename(staging, home)
    return home / "vault", {**data, "cached": False}


def make_queries(vault_dir: Path, n: int, seed: int = 0) -> list[dict[str, str]]:
    """``n`` known-item style queries from random notes' ``## headings`` or titles (for latency).

    Each is ``{"_id", "text", "rel_path"}`` where rel_path is the note the text came from
    (not necessarily the only note with that text: titles and headings repeat).
    """
    vault_dir = Path(vault_dir)
    files = _md_files(vault_dir)
    if n > len(files):
        raise ValueError(f"asked for {n} queries but {vault_dir} has only {len(files)} notes")
    rng = random.Random(seed)
    queries = []
    for qnum, path in enumerate(rng.sample(files, n)):
        title, body = split_frontmatter(path.read_text(encoding="utf-8"))
        heads = [m.group(2) for m in map(_HEADING.match, body.splitlines()) if m]
        text = rng.choice(heads) if heads and (rng.random() < 0.5 or not title) else (title or path.stem)
        queries.append({"_id": f"q{qnum}", "text": text, "rel_path": path.relative_to(vault_dir).as_posix()})
    return queries


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: make a synthetic vault and print what was written."""
    parser = argparse.ArgumentParser(description="Make a synthetic vault of real-text notes.")
    parser.add_argument("out", type=Path, help="output folder (absent or empty)")
    parser.add_argument("n", type=int, help="number of notes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    summary = make_vault(args.out, args.n, args.seed)
    print(
        f"wrote {summary.notes} notes in {summary.folders} folders, {summary.links} wikilinks, "
        f"{summary.bytes / 2**20:.1f} MiB in {summary.seconds:.1f} s -> {summary.out_dir}"
    )


if __name__ == "__main__":
    main()
