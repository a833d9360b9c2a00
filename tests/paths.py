"""Where the real corpora are: ``shared/data`` beside the checkout (as CI lays it out), else /work/shared."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_BESIDE = REPO.parent / "shared" / "data"
DATA = _BESIDE if _BESIDE.is_dir() else Path("/work/shared/data")
DENDRON = DATA / "dendron" / "vault"
POWERSHELL = DATA / "powershell-docs" / "reference"
