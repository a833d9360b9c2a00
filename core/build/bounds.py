"""Bounds on what one input may cost the build: a note's vocabulary, a worker's lifetime.

- ``bound_vocabulary``: one note adds at most ``MAX_NOTE_WORDS`` distinct words to the index
  (an 11 MB note of 1.2 million distinct words cost 1 GB to build and made every later search
  slow and big); the rest of its body is not indexed and ``vocabulary_truncated`` is reported.
- ``die_with_parent``: a forked parse worker is killed by the kernel when its builder dies, so
  a killed builder never leaves an orphan behind.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import sys
from dataclasses import replace

from core.vault.notes import ParsedNote
from core.vault.problems import Problem

MAX_NOTE_WORDS = 50_000  # distinct words one note may add to the index (more: its body is cut, reported)
_WORD = re.compile(r"\w+")
_PR_SET_PDEATHSIG = 1


def bound_vocabulary(note: ParsedNote) -> ParsedNote:
    """Index at most ``MAX_NOTE_WORDS`` distinct words of one note's body: a note of a million distinct
    words would otherwise grow the vocabulary (and every later search's memory) by as much. The body
    is cut before the first word past the bound and a ``vocabulary_truncated`` problem is recorded.
    (A body shorter than twice the bound cannot hold that many distinct words: not scanned.)"""
    body = note.body
    if len(body) < 2 * MAX_NOTE_WORDS:
        return note
    seen: set[str] = set()
    for match in _WORD.finditer(body):
        word = match.group().casefold()
        if word in seen:
            continue
        if len(seen) >= MAX_NOTE_WORDS:
            cut = match.start()
            detail = f"over {MAX_NOTE_WORDS} distinct words: indexed the first {cut} of {len(body)} characters"
            problem = Problem(note.rel_path, "vocabulary_truncated", detail)
            return replace(note, body=body[:cut], problems=(*note.problems, problem))
        seen.add(word)
    return note


def die_with_parent() -> None:
    """Linux: ask the kernel to SIGKILL this worker when the builder that forked it dies."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return  # no prctl: the worker still exits at its next pipe read once the builder is gone
    if os.getppid() == 1:  # the builder died before prctl took effect
        os._exit(1)
