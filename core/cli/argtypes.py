"""Argument types of the CLI: each refuses bad input as a usage error (argparse's message, exit 2).

A numeric option's bounds are written once, in its :class:`NumberRange`: the option's help and
the error for a value outside it both say :attr:`NumberRange.text`, so they cannot disagree
(tests/test_cli_ranges.py checks every ranged option of every command).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


def _number_text(value: float) -> str:
    return f"{value:g}" if value < 10**6 else f"{value:,.0f}"


@dataclass(frozen=True)
class NumberRange:
    """An argparse ``type`` for a number between ``low`` and ``high`` (inclusive), whole or not."""

    low: float
    high: float
    whole: bool = True
    unit: str = ""  # said after the range: "seconds", "ms"

    @property
    def text(self) -> str:
        """The range as help and errors say it: ``1 to 10000``, ``0 to 86400 seconds``."""
        unit = f" {self.unit}" if self.unit else ""
        return f"{_number_text(self.low)} to {_number_text(self.high)}{unit}"

    def __call__(self, text: str) -> int | float:
        try:
            value: int | float = int(text) if self.whole else float(text)
        except ValueError:
            kind = "a whole number" if self.whole else "a number"
            raise argparse.ArgumentTypeError(f"not {kind}: {text!r} (allowed: {self.text})") from None
        if not self.low <= value <= self.high:  # NaN fails too
            raise argparse.ArgumentTypeError(f"must be {self.text}, not {text.strip()}")
        return value


MAX_RESULTS = 10_000
RESULTS = NumberRange(1, MAX_RESULTS)  # -n, -k
COUNT = NumberRange(1, 10**9)  # --keep, --chunk-size, --embed-limit
OVERLAP = NumberRange(0, 10**9)  # --chunk-overlap
SECONDS = NumberRange(0, 86_400, whole=False, unit="seconds")  # --wait, freshness budgets and windows
DEBOUNCE_MS = NumberRange(0, 600_000, unit="ms")
PORT = NumberRange(0, 65_535)


def mode(text: str) -> str:
    """A mode name or a deprecated alias (accepted, not listed in the choices)."""
    from core.registry import DEPRECATED_ALIASES, MODE_NAMES  # loaded by the commands that take a mode

    if text in MODE_NAMES or text in DEPRECATED_ALIASES:
        return text
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(MODE_NAMES)})")


def text_arg(text: str) -> str:
    """A free-text argument: undecodable bytes from the command line (lone surrogates) are refused."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("not valid UTF-8 text") from None
    return text
