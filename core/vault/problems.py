"""What went wrong while reading the vault: one ``Problem`` per file and reason (``core.vault.notes`` lists the reasons)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One problem met while reading the vault. ``reason`` is a stable snake_case code."""

    path: str
    reason: str
    detail: str = ""
