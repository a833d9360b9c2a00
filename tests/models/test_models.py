"""Model resolution, presets, local directories and pinned downloads - all offline.

The hub is replaced by a LOCAL fake of ``huggingface_hub.hf_hub_download`` that copies files
from a tmp "hub" directory and raises huggingface_hub's real LocalEntryNotFoundError when
offline or when asked for the (empty) local cache, exactly like the real function. The unit
under test (resolve/download/verify) is never mocked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import huggingface_hub as huggingface_hub
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError, RevisionNotFoundError  # noqa: E402

from core.errors import ModelDownloadError, ModelError, ModelMissingError, OnnxRuntimeMissingError  # noqa: E402
from core.models import catalog as models  # noqa: E402
from core.models.catalog import download_model, list_models, resolve_model
from core.models.local import ModelConfig, PinnedFile, file_sha256, load_local_dir, verify_model_files
from core.models.presets import PRESETS, ModelPreset

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTENT = {
    "onnx/model.onnx": b"tiny graph",
    "onnx/model.onnx_data": b"external weights",
    "tokenizer.json": b'{"tokenizer": true}',
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tiny_preset(unpinned: str = "onnx/model.onnx_data") -> ModelPreset:
    """A preset shaped like bge-m3 (graph + external data + tokenizer), one file left unpinned."""
    files = tuple(PinnedFile(p, len(c), None if p == unpinned else sha(c)) for p, c in CONTENT.items())
    return ModelPreset(
        name="tiny",
        repo_id="org/tiny",
        revision="a" * 40,
        model_file="onnx/model.onnx",
        tokenizer_file="tokenizer.json",
        files=files,
        config=ModelConfig(kind="embedding", name="tiny", revision="a" * 40, pooling="mean"),
    )


class FakeHub:
    """Files under ``root/<repo_id>/<revision>/<path>``; ``hf_cache`` plays the HF cache."""

    def __init__(self, root: Path) -> None:
        self.root, self.hf_cache, self.calls = root / "hub", root / "hf-cache", []

    def put(self, repo: str, revision: str, files: dict[str, bytes], *, cached: bool = False) -> None:
        for path, data in files.items():
            target = (self.hf_cache if cached else self.root) / repo / revision / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def hf_hub_download(self, repo_id, filename, *, revision=None, local_dir=None, local_files_only=False, **_):
        self.calls.append((repo_id, filename, revision, local_files_only))
        if local_files_only:
            cached = self.hf_cache / repo_id / revision / filename
            if cached.is_file():
                return str(cached)
            raise LocalEntryNotFoundError("Cannot find the requested files in the disk cache")
        if os.environ.get("HF_HUB_OFFLINE") == "1":
            raise LocalEntryNotFoundError("offline mode is enabled and the file is not cached")
        source = self.root / repo_id / revision / filename
        if not source.is_file():
            import httpx2

            raise RevisionNotFoundError(
                "no such file at revision", response=httpx2.Response(404, request=httpx2.Request("GET", "https://x"))
            )
        target = Path(local_dir) / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        return str(target)


@pytest.fixture
def hub(tmp_path, monkeypatch) -> FakeHub:
    fake = FakeHub(tmp_path)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake.hf_hub_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return fake


# ---------------------------------------------------------------- presets


def test_preset_table_is_pinned_and_documents_its_only_unpinned_file():
    unpinned = set()
    for preset in PRESETS.values():
        assert re.fullmatch(r"[0-9a-f]{40}", preset.revision)
        assert preset.files[0].path == preset.model_file and preset.files[-1].path == preset.tokenizer_file
        for f in preset.files:
            assert f.size and f.size > 0
            if f.sha256 is None:
                unpinned.add((preset.name, f.path))
            else:
                assert re.fullmatch(r"[0-9a-f]{64}", f.sha256)
    assert unpinned == {("bge-m3", "onnx/Constant_7_attr__value")}
    m3 = PRESETS["bge-m3"]
    assert m3.revision == "5617a9f61b028005a4858fdac845db406aefb181"
    assert {f.path: f.sha256 for f in m3.files}[
        "onnx/model.onnx_data"
    ] == "1eebfb28493f67bba03ce0ef64bfdc7fc5a3bd9d7493f818bb1d78cd798416b4"
    assert (m3.config.pooling, m3.config.dim, m3.config.output, m3.config.pad_id) == (
        "cls",
        1024,
        "token_embeddings",
        1,
    )
    assert PRESETS["bge-reranker-base"].kind == "reranker"
    assert PRESETS["bge-small-en-v1.5"].config.query_prefix.startswith("Represent this sentence")


def test_download_verifies_pins_records_every_digest_and_is_then_found_offline(hub, tmp_path):
    preset = tiny_preset()
    hub.put("org/tiny", preset.revision, CONTENT)
    files = download_model(preset, tmp_path / "cache")
    assert files.source == "vaultsearch_cache"
    manifest = json.loads((tmp_path / "cache/tiny/vaultsearch-download.json").read_text())
    assert manifest["revision"] == preset.revision
    assert manifest["files"] == {p: sha(c) for p, c in CONTENT.items()}  # the unpinned one is recorded too
    calls = len(hub.calls)
    again = resolve_model(preset, kind="embedding", cache_dir=tmp_path / "cache")
    assert len(hub.calls) == calls  # no hub call once downloaded
    assert again.model_path.read_bytes() == CONTENT["onnx/model.onnx"]
    assert [p.name for p in again.data_paths] == ["model.onnx_data"]
    expected = "".join(sorted(f"{n} {sha(CONTENT['onnx/' + n])}\n" for n in ("model.onnx", "model.onnx_data")))
    assert verify_model_files(again) == sha(expected.encode())


def test_download_sha_mismatch_deletes_file_and_names_expected_and_actual(hub, tmp_path):
    preset = tiny_preset()
    bad = dict(CONTENT, **{"tokenizer.json": b'{"tokenizer": TRUE}'})  # same length, other bytes
    assert len(bad["tokenizer.json"]) == len(CONTENT["tokenizer.json"])
    hub.put("org/tiny", preset.revision, bad)
    with pytest.raises(ModelDownloadError) as info:
        download_model(preset, tmp_path / "cache")
    assert info.value.reason == "model_download_failed"
    [problem] = info.value.evidence["problems"]
    assert problem == {
        "file": "tokenizer.json",
        "check": "sha256",
        "expected": sha(CONTENT["tokenizer.json"]),
        "actual": sha(bad["tokenizer.json"]),
    }
    assert not (tmp_path / "cache/tiny/tokenizer.json").exists()
    assert not (tmp_path / "cache/tiny/vaultsearch-download.json").exists()
    with pytest.raises(ModelMissingError):
        resolve_model(preset, kind="embedding", cache_dir=tmp_path / "cache")


def test_real_preset_pins_are_enforced(hub, tmp_path):
    preset = PRESETS["bge-small-en-v1.5"]
    hub.put(preset.repo_id, preset.revision, {"onnx/model.onnx": b"not the real graph", "tokenizer.json": b"{}"})
    with pytest.raises(ModelDownloadError) as info:
        download_model("bge-small-en-v1.5", tmp_path / "cache")
    checks = {(p["file"], p["check"], p["expected"]) for p in info.value.evidence["problems"]}
    assert checks == {("onnx/model.onnx", "size", 133_093_490), ("tokenizer.json", "size", 711_396)}
    assert all(call[2] == preset.revision for call in hub.calls)  # always the pinned revision


def test_offline_download_is_model_missing_not_a_raw_hub_error(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelMissingError) as info:
        download_model(tiny_preset(), tmp_path / "cache")
    assert info.value.reason == "model_missing"
    assert isinstance(info.value.__cause__, LocalEntryNotFoundError)


def test_hub_http_error_is_a_download_error(hub, tmp_path):
    with pytest.raises(ModelDownloadError) as info:  # nothing on the fake hub
        download_model(tiny_preset(), tmp_path / "cache")
    assert info.value.evidence["file"] == "onnx/model.onnx"


def test_missing_preset_says_exactly_how_to_get_it(hub, tmp_path):
    with pytest.raises(ModelMissingError) as info:
        resolve_model("bge-small-en-v1.5", kind="embedding", cache_dir=tmp_path / "empty")
    assert info.value.reason == "model_missing"
    assert info.value.evidence["download_command"] == "vaultsearch models install bge-small-en-v1.5"
    assert "vaultsearch models install bge-small-en-v1.5" in info.value.hint
    assert "vaultsearch models install DIR" in info.value.hint and "build-minilm" in info.value.hint
    assert all(call[3] for call in hub.calls)  # only local lookups, never a download


def test_resolve_with_download_fetches_once(hub, tmp_path):
    preset = tiny_preset()
    hub.put("org/tiny", preset.revision, CONTENT)
    files = resolve_model(preset, kind="embedding", cache_dir=tmp_path / "c", download=True)
    assert files.source == "vaultsearch_cache" and files.tokenizer_path.is_file()


def test_preset_found_in_the_hugging_face_cache_is_verified_against_pins(hub, tmp_path):
    preset = tiny_preset()
    hub.put("org/tiny", preset.revision, CONTENT, cached=True)
    files = resolve_model(preset, kind="embedding", cache_dir=tmp_path / "empty")
    assert files.source == "hf_cache"
    verify_model_files(files)
    files.model_path.write_bytes(b"tiny grapH")  # same size, other bytes
    with pytest.raises(ModelError) as info:
        verify_model_files(files)
    assert info.value.evidence["problems"][0]["check"] == "sha256"


def test_recorded_digest_of_an_unpinned_file_catches_tampering(hub, tmp_path):
    preset = tiny_preset()
    hub.put("org/tiny", preset.revision, CONTENT)
    files = download_model(preset, tmp_path / "cache")
    files.data_paths[0].write_bytes(b"External weights")  # the unpinned file
    with pytest.raises(ModelError) as info:
        verify_model_files(files)
    [problem] = info.value.evidence["problems"]
    assert problem["file"].endswith("model.onnx_data") and problem["expected"] == sha(CONTENT["onnx/model.onnx_data"])


def test_cached_download_of_another_revision_counts_as_missing(hub, tmp_path):
    preset = tiny_preset()
    hub.put("org/tiny", preset.revision, CONTENT)
    download_model(preset, tmp_path / "cache")
    manifest = tmp_path / "cache/tiny/vaultsearch-download.json"
    manifest.write_text(manifest.read_text().replace(preset.revision, "b" * 40))
    with pytest.raises(ModelMissingError):
        resolve_model(preset, kind="embedding", cache_dir=tmp_path / "cache")


def test_preset_of_the_wrong_kind_is_refused(hub):
    with pytest.raises(ModelError) as info:
        resolve_model("bge-reranker-base", kind="embedding")
    assert info.value.reason == "model_invalid"


def test_list_models_reports_presence(hub, tmp_path):
    preset = PRESETS["bge-small-en-v1.5"]
    root = tmp_path / "cache" / preset.name
    for f in preset.files:
        (root / f.path).parent.mkdir(parents=True, exist_ok=True)
        (root / f.path).write_bytes(b"x")
    (root / "vaultsearch-download.json").write_text(json.dumps({"revision": preset.revision, "files": {}}))
    rows = {r["name"]: r for r in list_models(tmp_path / "cache")}
    assert set(rows) == set(PRESETS)
    assert rows["bge-small-en-v1.5"]["present"] and rows["bge-small-en-v1.5"]["source"] == "vaultsearch_cache"
    assert not rows["bge-m3"]["present"] and rows["bge-m3"]["default"] and rows["bge-m3"]["hf_cache_checked"]


# ---------------------------------------------------------------- local directories


def make_dir(path: Path, config: dict | None, files: tuple[str, ...] = ("model.onnx", "tokenizer.json")) -> Path:
    path.mkdir(parents=True)
    for name in files:
        (path / name).write_bytes(name.encode())
    if config is not None:
        (path / "vaultsearch-model.json").write_text(json.dumps(config))
    return path


def test_local_dir_with_defaults_and_external_data(tmp_path):
    d = make_dir(
        tmp_path / "m",
        {"kind": "embedding", "pooling": "cls"},
        ("model.onnx", "tokenizer.json", "model.onnx_data", ".hidden"),
    )
    files = resolve_model(d, kind="embedding")
    cfg = files.config
    assert (cfg.name, cfg.max_length, cfg.normalize, cfg.query_prefix, cfg.output) == ("m", 512, True, "", None)
    assert [p.name for p in files.data_paths] == ["model.onnx_data"]
    assert files.source == "local_dir" and files.expected == ()


def test_weights_digest_depends_on_bytes_not_location(tmp_path):
    a = make_dir(tmp_path / "a", {"kind": "reranker"})
    b = make_dir(tmp_path / "b", {"kind": "reranker", "name": "other"})
    digest_a = verify_model_files(load_local_dir(a, kind="reranker"))
    assert digest_a == verify_model_files(load_local_dir(b, kind="reranker"))
    (b / "model.onnx").write_bytes(b"changed")
    assert verify_model_files(load_local_dir(b, kind="reranker")) != digest_a
    assert file_sha256(b / "model.onnx") == sha(b"changed")


@pytest.mark.parametrize(
    "config, expected",
    [
        ({"kind": "embedding"}, 1),  # pooling missing
        ({"kind": "embedding", "pooling": "max", "max_length": 0, "colour": 1}, 3),
        ({"kind": "reranker", "pooling": "mean", "normalize": "yes"}, 2),  # embedding-only keys
        ({"kind": "embedding", "pooling": "mean", "dim": True, "data_files": ["../x"]}, 2),
    ],
)
def test_invalid_config_collects_every_problem(tmp_path, config, expected):
    d = make_dir(tmp_path / "m", config)
    with pytest.raises(ModelError) as info:
        load_local_dir(d, kind=config["kind"])
    assert info.value.reason == "model_invalid"
    assert len(info.value.evidence["problems"]) == expected


def test_bad_kind_or_unreadable_config_is_model_error(tmp_path):
    with pytest.raises(ModelError):
        load_local_dir(make_dir(tmp_path / "a", {"kind": "classifier"}), kind="embedding")
    d = make_dir(tmp_path / "b", None)
    (d / "vaultsearch-model.json").write_text("{not json")
    with pytest.raises(ModelError):
        load_local_dir(d, kind="embedding")
    with pytest.raises(ModelError) as info:
        load_local_dir(make_dir(tmp_path / "c", {"kind": "reranker"}), kind="embedding")
    assert info.value.evidence["kind"] == "reranker"


def test_absent_directory_or_files_is_model_missing(tmp_path):
    with pytest.raises(ModelMissingError) as info:
        resolve_model(tmp_path / "nowhere", kind="embedding")
    assert "bge-m3" in info.value.evidence["known"]
    with pytest.raises(ModelMissingError) as info:
        load_local_dir(make_dir(tmp_path / "m", {"kind": "reranker"}, ("model.onnx",)), kind="reranker")
    assert info.value.evidence["missing"] == ["tokenizer.json"]
    d = make_dir(tmp_path / "n", {"kind": "reranker", "data_files": ["weights.bin"]})
    with pytest.raises(ModelMissingError):
        load_local_dir(d, kind="reranker")


# ---------------------------------------------------------------- optional backend


def test_import_backend_rejects_non_backend_modules():
    with pytest.raises(ValueError):
        models.import_backend("numpy")


def _run(code: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_model_modules_import_without_the_dense_extra():
    out = _run(
        "import sys\n"
        "import core.models.catalog, core.dense, core.rerank\n"
        "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'huggingface_hub') if m in sys.modules))"
    )
    assert out == "[]"


def test_real_huggingface_hub_offline_miss_is_model_missing(tmp_path):
    """The real hf_hub_download (fresh interpreter, empty HF cache, offline): our typed error, no raw one."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from core.errors import ModelMissingError\n"
        "from core.models.catalog import download_model, resolve_model\n"
        "for call in (lambda: resolve_model('bge-small-en-v1.5', kind='embedding', cache_dir=Path(sys.argv[1])),\n"
        "             lambda: download_model('bge-small-en-v1.5', Path(sys.argv[1]))):\n"
        "    try:\n"
        "        call()\n"
        "    except ModelMissingError as exc:\n"
        "        print(exc.reason)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "cache")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf-home")),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["model_missing", "model_missing"]


def test_loading_without_onnxruntime_raises_the_typed_error(tmp_path):
    d = make_dir(tmp_path / "m", {"kind": "embedding", "pooling": "mean"})
    out = _run(
        "import sys\n"
        "sys.modules['onnxruntime'] = None\n"
        "from pathlib import Path\n"
        "from core.errors import OnnxRuntimeMissingError\n"
        "from core.models.catalog import load_local_dir\n"
        "from core.dense import Embedder\n"
        "from core.rerank import CrossEncoder\n"
        "files = load_local_dir(Path(sys.argv[1]), kind='embedding')\n"
        "try:\n"
        "    Embedder(files)\n"
        "except OnnxRuntimeMissingError as exc:\n"
        "    print(exc.reason, exc.evidence['module'], exc.hint)\n",
        str(d),
    )
    assert out == f"{OnnxRuntimeMissingError.reason} onnxruntime {OnnxRuntimeMissingError.hint}"
    assert "vaultsearch[dense]" in OnnxRuntimeMissingError.hint
