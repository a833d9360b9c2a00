"""A note's names as lookup keys: the query that is exactly one of a note's names finds that name.

``name_key`` is shared by the build (each name a note has, ``core.vault.notes.reader_names``) and
the query (``core.modes.lexical``): case, Unicode compatibility forms, punctuation and spacing do
not matter (``Get-Item`` = ``get item``, ``BGB`` = ``bgb``, ``ＢＧＢ`` = ``BGB``).
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[^\W_]+")
# Longer texts are not names anyone types: their key is not stored, a longer query is not looked up.
MAX_NAME_CHARS = 200


def name_key(text: str) -> str:
    """The words of ``text`` (NFKC, case-folded) joined by one space; "" when it has none or is too long."""
    if len(text) > MAX_NAME_CHARS:
        return ""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))
