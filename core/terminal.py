"""Text for a terminal: every control character shown as an escape, never interpreted (stdlib only, so the
CLI's output of any command loads no rendering or ranking module; ``core.render`` re-exports both names)."""

from __future__ import annotations

import re

# C0 and C1 control characters (tab and newline are kept), DEL, and the bidi overrides/isolates.
UNSAFE_CODEPOINTS = (
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
_UNSAFE = re.compile("[" + "".join(re.escape(chr(c)) for c in UNSAFE_CODEPOINTS) + "]")


def terminal_safe(text: str) -> str:
    """Text with every control character (but tab and newline) and bidi control shown as an escape."""
    return _UNSAFE.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text
    )
