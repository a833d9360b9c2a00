"""``vaultsearch status`` reads as lines, not Python: the model's settings and every nested value in
words; ``--json`` keeps the data as it was."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import note, write_vault

from core import cli
from core.build.builder import build_index
from core.build.embed import embed_index
from core.index.status import index_status
from core.index.watch_state import BuildOutcome
from core.render import format_status, plain_value
from tests.minilm_fixture import FP32

# what a Python repr of a dict, list, None or bool leaves in text
REPR = re.compile(r"\{'|\['|': |\bNone\b|\bTrue\b|\bFalse\b")


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    from tests.minilm_fixture import cached_model_dirs, fixture_root

    model = cached_model_dirs(fixture_root(request, tmp_path_factory))[FP32]
    root = write_vault(
        tmp_path_factory.mktemp("status-text") / "vault",
        {"a.md": note("Lantern", "Lanterns light the harbour."), "b.md": note("Harbour", "Boats and tides.")},
    )
    build_index(root)
    embed_index(root, model=str(model))
    return root


def test_status_shows_the_model_settings_as_lines(embedded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", str(embedded)]) == 0
    out = capsys.readouterr().out
    assert not REPR.search(out), out
    model = next(line for line in out.splitlines() if line.startswith("model "))
    assert "all-minilm-l6-v2-fp32" in model and "384 dims" in model and "mean pooling" in model
    assert "normalised" in model and "at most 256 tokens" in model
    assert re.search(r"^\s+from .*minilm_fp32$", out, flags=re.M)  # where it loads from
    assert re.search(r"^\s+revision -, weights sha256 [0-9a-f]{16}\.\.\.$", out, flags=re.M)


def test_status_json_keeps_the_model_identity_as_data(embedded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", str(embedded), "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["dense"]["model"]
    assert model == index_status(embedded)["dense"]["model"]
    assert {"name", "dim", "pooling", "weights_sha256", "model_ref"} <= set(model) and model["dim"] == 384


def test_a_failed_watch_build_reads_as_words(embedded: Path) -> None:
    status = index_status(embedded)
    failure = BuildOutcome(False, 1_700_000_000.0, reason="build_failed", message="disk full", changed_paths=("a.md",))
    status["last_build_failure"] = failure.to_dict()
    text = format_status(status)
    assert "watch      last build FAILED [build_failed] 2023-11-14 22:13:20 UTC: disk full" in text
    assert "changed: a.md" in text and not REPR.search(text), text


def test_plain_value_never_prints_a_repr() -> None:
    assert plain_value(None) == "-" and plain_value(True) == "yes" and plain_value([]) == "none"
    assert plain_value({"a": 1, "b": {"c": [1, 2]}, "d": None}) == "a 1; b (c 1, 2); d -"
