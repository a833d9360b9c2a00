"""The model presets: pinned repositories, revisions and file digests (downloaded by catalog)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import ModelMissingError
from core.models.local import KIND_EMBEDDING, KIND_RERANKER, ModelConfig, PinnedFile

DEFAULT_EMBEDDING_MODEL = "bge-m3"
DEFAULT_RERANKER_MODEL = "bge-reranker-base"


@dataclass(frozen=True)
class ModelPreset:
    """A named, pinned model on the Hugging Face hub."""

    name: str
    repo_id: str
    revision: str
    model_file: str
    tokenizer_file: str
    files: tuple[PinnedFile, ...]
    config: ModelConfig
    description: str = ""

    @property
    def kind(self) -> str:
        return self.config.kind


def _preset(
    name: str, repo: str, rev: str, files: tuple[PinnedFile, ...], description: str, **config: Any
) -> ModelPreset:
    return ModelPreset(
        name=name,
        repo_id=repo,
        revision=rev,
        model_file=files[0].path,
        tokenizer_file=files[-1].path,
        files=files,
        config=ModelConfig(name=name, revision=rev, **config),
        description=description,
    )


# Provenance of every pin is in docs/models.md. Files: the graph first, the tokenizer last.
PRESETS: Mapping[str, ModelPreset] = {
    p.name: p
    for p in (
        _preset(
            "bge-m3",
            "BAAI/bge-m3",
            "5617a9f61b028005a4858fdac845db406aefb181",
            (
                PinnedFile(
                    "onnx/model.onnx", 724_923, "f84251230831afb359ab26d9fd37d5936d4d9bb5d1d5410e66442f630f24435b"
                ),
                PinnedFile(
                    "onnx/model.onnx_data",
                    2_266_820_608,
                    "1eebfb28493f67bba03ce0ef64bfdc7fc5a3bd9d7493f818bb1d78cd798416b4",
                ),
                PinnedFile("onnx/Constant_7_attr__value", 65_552, None),
                PinnedFile(
                    "tokenizer.json", 17_098_108, "21106b6d7dab2952c1d496fb21d5dc9db75c28ed361a05f5020bbba27810dd08"
                ),
            ),
            "multilingual, 1024 dims, CLS pooling (default embedding model)",
            kind=KIND_EMBEDDING,
            pooling="cls",
            dim=1024,
            output="token_embeddings",
            pad_token="<pad>",
            pad_id=1,
        ),
        _preset(
            "bge-small-en-v1.5",
            "BAAI/bge-small-en-v1.5",
            "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a",
            (
                PinnedFile(
                    "onnx/model.onnx", 133_093_490, "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35"
                ),
                PinnedFile(
                    "tokenizer.json", 711_396, "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
                ),
            ),
            "English, 384 dims, CLS pooling; better and far faster on English-only vaults",
            kind=KIND_EMBEDDING,
            pooling="cls",
            dim=384,
            pad_token="[PAD]",
            pad_id=0,
            query_prefix="Represent this sentence for searching relevant passages: ",
        ),
        _preset(
            "bge-reranker-base",
            "BAAI/bge-reranker-base",
            "580465186bcc87f862a9b2f9003d720af2377980",
            (
                PinnedFile(
                    "onnx/model.onnx", 1_112_459_588, "15b9a8c3da82eddf263df571281166e00e9308fe19d077084b642ebfcaf06d2b"
                ),
                PinnedFile(
                    "tokenizer.json", 17_098_107, "9eb652ac4e40cc093272bbbe0f55d521cf67570060227109b5cdc20945a4489e"
                ),
            ),
            "cross-encoder, English + Chinese; score = logits[:, 0] (default reranker)",
            kind=KIND_RERANKER,
            output="logits",
            pad_token="<pad>",
            pad_id=1,
        ),
    )
}


def preset_named(name: str | ModelPreset) -> ModelPreset:
    """The preset of that name, or ModelMissingError listing the known ones."""
    if isinstance(name, ModelPreset):
        return name
    if name not in PRESETS:
        raise ModelMissingError(
            f"unknown model preset {name!r}; known: {', '.join(PRESETS)}",
            hint="name a preset or pass a local model directory",
            model=name,
            known=list(PRESETS),
        )
    return PRESETS[name]
