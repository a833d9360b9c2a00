"""Serve tests: a reader waits for a watcher as long as a loaded test machine may need.

A search falls back to the stat walk (labelled ``watch_fallback``) when the watcher has not caught
up within two event lags and ``CATCH_UP_MARGIN_SECONDS``: correct, but the tests that assert the
watcher's own answer would then depend on the machine's load. Raised here for every serve test (in
this process: the readers); nothing asserts a wait's length.
"""

from __future__ import annotations

import pytest

from core.index import watch_state


@pytest.fixture(autouse=True)
def patient_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_state, "CATCH_UP_MARGIN_SECONDS", 30.0)
