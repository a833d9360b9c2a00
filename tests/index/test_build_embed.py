"""Issue 11: ``index --embed`` after a small change publishes text and vectors in ONE generation.

So there is no window in which ``semantic`` fails closed because the vectors of the changed
notes come in a later generation. A change larger than one embedding batch keeps the old,
bounded two-step behaviour (text first, vectors in batches), still labelled meanwhile.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import note, write_files

from core import generations as gen
from core.build import embed
from core.build.builder import build_index
from core.build.embed import embed_index
from core.cli import main
from core.searcher import search_vault
from tests.minilm_fixture import FP32, cached_model_dirs, fixture_root

TOPICS = ["The puppy chased a red ball.", "Boil the pasta for nine minutes.", "The volcano erupted at dawn."]


@pytest.fixture(scope="module")
def model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cached_model_dirs(fixture_root(request, tmp_path_factory))[FP32]


@pytest.fixture
def vault(tmp_path: Path, model: Path) -> Path:
    gen.clear_verify_cache()
    root = write_files(tmp_path / "vault", {f"n{i}.md": note(f"Note {i}", t) for i, t in enumerate(TOPICS)})
    build_index(root)
    embed_index(root, model=model)
    return root


def generations(vault: Path) -> set[str]:
    return {row["generation_id"] for row in gen.list_generations(gen.layout_for(vault))}


def run_index(vault: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    assert main(["index", str(vault), "--embed", "--model", str(model), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_small_change_publishes_text_and_vectors_in_one_generation(
    vault: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = generations(vault)
    write_files(vault, {"n1.md": note("Note 1", "The lava flowed down the mountain side.")})
    out = run_index(vault, model, capsys)
    assert out["build"]["embedded"] >= 1
    assert out["embed"]["generations_published"] == [] and out["embed"]["remaining"] == 0
    assert generations(vault) - before == {out["build"]["generation_id"]}  # one new generation, complete
    hits = search_vault(vault, "molten rock from a volcano", mode="semantic", model=str(model))
    assert hits.actual_mode == "semantic" and hits[0].index_generation_id == out["build"]["generation_id"]


def test_a_change_larger_than_one_batch_keeps_the_two_step_publish(
    vault: Path, model: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embed, "PUBLISH_EVERY", 1)
    write_files(vault, {f"new{i}.md": note(f"New {i}", f"fresh words {i}") for i in range(3)})
    out = run_index(vault, model, capsys)
    assert out["build"]["embedded"] == 0
    assert out["embed"]["embedded"] == 3 and out["embed"]["remaining"] == 0
    assert (
        out["embed"]["generations_published"]
        and out["build"]["generation_id"] not in out["embed"]["generations_published"]
    )
