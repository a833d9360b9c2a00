"""Embedding cost cut at the source (issue #14): identical chunk texts are embedded once (within a batch
and across the batches of one call), the copies get exactly the vector their text gets alone, and
``status`` says how long the rest of the dense index should take."""

from __future__ import annotations

import numpy as np
import onnxruntime  # noqa: F401  (the dense extra is installed for the tests)
import pytest

from core import generations as gen
from core.build import embed as embed_module
from core.build.builder import build_index
from core.build.embed import embed_index, pending_chunks
from core.dense import load_embedder
from core.index.status import index_status
from core.render import format_status
from tests.conftest import note
from tests.minilm_fixture import FP32, cached_model_dirs, fixture_root

PAGE = note("Get-Item", "Gets the item at the location.\n\n## Parameters\n\nThe path of the item to get.")
FILES = {
    "7.4/get-item.md": PAGE,  # the same page in three version folders: same title, headings and body
    "7.5/get-item.md": PAGE,
    "7.6/get-item.md": PAGE,
    "7.4/set-item.md": note("Set-Item", "Changes the value of an item."),
}


@pytest.fixture(scope="module")
def model(request, tmp_path_factory):
    return cached_model_dirs(fixture_root(request, tmp_path_factory))[FP32]


@pytest.fixture
def vault(make_vault):
    vault = make_vault(FILES)
    build_index(vault)
    return vault


def spy_texts(monkeypatch: pytest.MonkeyPatch, model) -> list[str]:
    """Every text the model is asked to embed (the Embedder itself runs unchanged)."""
    seen: list[str] = []
    embedder = load_embedder(str(model.resolve()))
    real = embedder.embed_passages

    def counting(texts, batch_size=32):
        seen.extend(texts)
        return real(texts, batch_size=batch_size)

    monkeypatch.setattr(embedder, "embed_passages", counting)
    return seen


def stored_vectors(vault) -> dict[str, np.ndarray]:
    """passage text -> every stored vector of a chunk with that text."""
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault)))
    try:
        texts = dict(pending_chunks(conn, None, everything=True))
        out: dict[str, list[np.ndarray]] = {}
        for cid, blob in conn.execute("SELECT chunk_id, vector FROM chunk_vectors"):
            out.setdefault(texts[cid], []).append(np.frombuffer(blob, "<f4"))
        return out
    finally:
        conn.close()


@pytest.mark.parametrize("publish_every", [1, 2048])
def test_identical_chunk_texts_are_embedded_once(vault, model, monkeypatch, publish_every) -> None:
    seen = spy_texts(monkeypatch, model)
    report = embed_index(vault, model=model, publish_every=publish_every)
    by_text = stored_vectors(vault)
    assert report.complete and report.embedded == report.chunks == sum(map(len, by_text.values()))
    assert sorted(seen) == sorted(by_text) and len(seen) == len(set(seen))  # each distinct text once
    assert report.reused == report.chunks - len(by_text) > 0
    embedder = load_embedder(str(model.resolve()))
    for text, vectors in by_text.items():
        alone = embedder.embed_passages([text])[0]  # what the text gets embedded by itself
        for vector in vectors:
            assert np.allclose(vector, alone, atol=1e-5)


def test_a_tiny_reuse_budget_embeds_again_rather_than_guess(vault, model, monkeypatch) -> None:
    seen = spy_texts(monkeypatch, model)
    monkeypatch.setattr(embed_module, "REUSE_BYTES", 0)
    report = embed_index(vault, model=model, publish_every=1)
    assert report.complete and len(seen) > len(set(seen))  # copies in later batches were embedded again
    assert report.reused == 0 and sum(map(len, stored_vectors(vault).values())) == report.chunks


def test_status_says_the_time_left_for_the_dense_index(vault, model) -> None:
    assert index_status(vault)["dense"]["estimate"] == "no_embed_run_measured"
    embed_index(vault, model=model, limit=2)
    dense = index_status(vault)["dense"]
    pending = dense["chunks"] - dense["chunks_with_vectors"]
    assert pending > 0 and dense["estimate"] == "last_embed_rate" and dense["chunks_per_s"] > 0
    assert dense["seconds_left"] == pytest.approx(pending / dense["chunks_per_s"], abs=0.1)
    assert "min left at" in format_status(index_status(vault))
    embed_index(vault, model=model)
    assert index_status(vault)["dense"]["seconds_left"] == 0.0


def test_the_rate_is_recorded_with_the_generation(vault, model) -> None:
    embed_index(vault, model=model)
    timings = gen.list_generations(gen.layout_for(vault))[0]["timings"]
    assert timings["embed_chunks_per_s"] > 0 and timings["embed"] > 0
