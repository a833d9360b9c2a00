"""embed_index and `vaultsearch index --embed / --embed-only`: real MiniLM weights, local model dirs."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import onnx  # noqa: F401  (the dense extra is installed for the tests)
import onnxruntime  # noqa: F401  (the dense extra is installed for the tests)
import pytest
import tokenizers  # noqa: F401  (the dense extra is installed for the tests)

from core import generations as gen  # noqa: E402
from core.build.builder import build_index  # noqa: E402
from core.build.embed import EmbedReport, embed_index, passage_text  # noqa: E402
from core.cli import main  # noqa: E402
from core.dense import stored_identity  # noqa: E402
from core.errors import ModelMissingError  # noqa: E402
from core.index.status import index_status  # noqa: E402
from core.index.tables.meta import get_meta  # noqa: E402
from core.searcher import search_vault  # noqa: E402
from tests.conftest import note  # noqa: E402
from tests.minilm_fixture import FP32, INT8  # noqa: E402

# Ten notes, each with its own `updated` date: n09 is the newest, n00 the oldest.
TOPICS = [
    "The puppy chased a red ball across the park lawn.",
    "Quarterly revenue grew by ten percent on strong cloud sales.",
    "Boil the pasta in salted water for nine minutes, then drain.",
    "The telescope revealed the rings of Saturn on a clear night.",
    "Tighten the bicycle chain and oil the rear derailleur.",
    "The orchestra rehearsed the second movement of the symphony.",
    "Water the tomato seedlings every morning during the heat wave.",
    "The database migration added an index on the orders table.",
    "She trained for the marathon by running hills every weekend.",
    "The volcano erupted and ash covered the nearby villages.",
]


def vault_files() -> dict[str, str]:
    return {f"n{i:02d}.md": note(f"Note {i}", body, updated=f"2024-01-{i + 10:02d}") for i, body in enumerate(TOPICS)}


@pytest.fixture
def vault(make_vault):
    return make_vault(vault_files())


def open_active(vault, index_dir=None) -> sqlite3.Connection:
    return gen.connect_readonly(gen.resolve(gen.layout_for(vault, index_dir)))


def vectors_by_chunk(vault) -> dict[int, bytes]:
    conn = open_active(vault)
    try:
        return dict(conn.execute("SELECT chunk_id, vector FROM chunk_vectors"))
    finally:
        conn.close()


def embedded_notes(vault) -> set[str]:
    conn = open_active(vault)
    try:
        return {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT n.rel_path FROM chunk_vectors v JOIN chunks c "
                "ON c.id = v.chunk_id JOIN notes n ON n.id = c.note_id"
            )
        }
    finally:
        conn.close()


def active_id(vault) -> str | None:
    return gen.resolve(gen.layout_for(vault)).generation_id


def test_passage_text_puts_title_and_headings_before_the_body():
    assert (
        passage_text("Install", json.dumps(["Setup", "Linux"]), "apt install x")
        == "Install\nSetup > Linux\n\napt install x"
    )
    assert passage_text("Install", "[]", "body") == "Install\n\nbody"
    assert passage_text("", "[]", "body") == "body"


def test_embed_all_publishes_a_generation_with_vectors_and_the_model_identity(vault, model_dirs):
    before = active_id(vault)
    report = embed_index(vault, model=model_dirs[FP32])
    assert isinstance(report, EmbedReport)
    assert report.embedded == report.chunks == 10 and report.complete and report.dropped == 0
    assert report.generations_published == [report.generation_id] != [before]
    assert active_id(vault) == report.generation_id
    conn = open_active(vault)
    try:
        meta = get_meta(conn)["dense_model"]
        blobs = [r[0] for r in conn.execute("SELECT vector FROM chunk_vectors")]
    finally:
        conn.close()
    assert meta["model_ref"] == str(model_dirs[FP32].resolve())
    assert meta["name"] == "all-minilm-l6-v2-fp32" and meta["dim"] == 384 and len(meta["weights_sha256"]) == 64
    assert all(len(b) == 384 * 4 for b in blobs)
    norms = np.linalg.norm(np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, 384), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4)
    record = gen.list_generations(gen.layout_for(vault))[0]  # newest first
    assert record["dense_chunks"] == 10 and json.loads(record["dense_model"])["model_ref"] == meta["model_ref"]
    status = index_status(vault)["dense"]
    assert (status["chunks_with_vectors"], status["chunks"], status["coverage"]) == (10, 10, 1.0)


def test_embedding_a_generation_of_several_segments_embeds_each_segment_newest_first(vault, model_dirs):
    (vault / "n10.md").write_text(note("Note 10", "A new note after the first build.", updated="2024-01-30"))
    build_index(vault)  # the incremental builder: a second segment
    before = [p.sha256 for p in gen.resolve(gen.layout_for(vault)).parts]
    assert len(before) == 2
    first = embed_index(vault, model=model_dirs[FP32], limit=1)  # one batch: the newest segment's one chunk
    middle = [p.sha256 for p in gen.resolve(gen.layout_for(vault)).parts]
    assert first.embedded == 1 and middle[0] == before[0] and middle[1] != before[1]
    report = embed_index(vault, model=model_dirs[FP32])
    assert report.embedded == 10 and report.chunks == 11 and report.complete
    after = [p.sha256 for p in gen.resolve(gen.layout_for(vault)).parts]
    assert len(after) == 2 and after[1] == middle[1]  # the complete newest segment was not written again
    assert len(embedded_notes(vault)) == 11


def test_a_complete_index_publishes_nothing(vault, model_dirs):
    embed_index(vault, model=model_dirs[FP32])
    gid = active_id(vault)
    report = embed_index(vault, model=model_dirs[FP32])
    assert (report.embedded, report.generations_published, active_id(vault)) == (0, [], gid)


def test_limit_embeds_newest_notes_first_one_generation_per_call(vault, model_dirs):
    seen = []
    for expected in ({"n09.md", "n08.md", "n07.md", "n06.md"}, {"n05.md", "n04.md", "n03.md", "n02.md"}):
        before = active_id(vault)
        report = embed_index(vault, model=model_dirs[FP32], limit=4)
        assert report.embedded == 4 and len(report.generations_published) == 1
        assert gen.list_generations(gen.layout_for(vault))[1]["generation_id"] == before
        seen.append(embedded_notes(vault))
        assert embedded_notes(vault) - set().union(*seen[:-1]) == expected
        assert search_vault(vault, "dog playing", mode="auto").fallback_reason == "dense_incomplete"
    report = embed_index(vault, model=model_dirs[FP32], limit=4)
    assert (report.embedded, report.remaining, report.complete) == (2, 0, True)
    results = search_vault(vault, "dog playing", mode="auto")
    assert (results.actual_mode, results.fallback_reason) == ("dense_hybrid", None)


def test_without_limit_a_generation_is_published_every_publish_every_chunks(vault, model_dirs):
    report = embed_index(vault, model=model_dirs[FP32], publish_every=4, keep=5)
    assert report.embedded == 10 and len(report.generations_published) == 3
    dense = [g["dense_chunks"] for g in gen.list_generations(gen.layout_for(vault))][:3]
    assert dense == [10, 8, 4]


def test_a_slow_model_publishes_every_publish_seconds_too(vault, model_dirs):
    # failed before (no publish_seconds): a slow model published only every publish_every (2048) chunks,
    # so a kill could lose an hour of BGE-M3 work; now a batch ends after its first model step past the time
    report = embed_index(vault, model=model_dirs[FP32], batch_size=4, publish_seconds=1e-9, keep=5)
    assert report.complete and report.embedded == 10 and len(report.generations_published) == 3
    dense = [g["dense_chunks"] for g in gen.list_generations(gen.layout_for(vault))][:3]
    assert dense == [10, 8, 4]  # one model batch (batch_size texts) per published generation


def test_unchanged_chunks_keep_their_vectors_across_a_rebuild(vault, model_dirs):
    embed_index(vault, model=model_dirs[FP32])
    old = vectors_by_chunk(vault)
    (vault / "n03.md").write_text(
        note("Note 3", "Comets have icy tails that point away from the sun.", updated="2024-01-13"), encoding="utf-8"
    )
    build_index(vault)
    kept = vectors_by_chunk(vault)
    assert len(kept) == 9 and all(old[cid] == blob for cid, blob in kept.items())
    record = gen.active_record(gen.layout_for(vault.resolve()))
    conn = open_active(vault)
    try:
        assert json.loads(record["dense_model"]) == get_meta(conn)["dense_model"]  # JSON, not a repr
    finally:
        conn.close()
    assert search_vault(vault, "comet", mode="semantic", allow_fallback=True).fallback_reason == "dense_incomplete"
    report = embed_index(vault, model=model_dirs[FP32])
    assert report.embedded == 1 and report.complete and embedded_notes(vault) >= {"n03.md"}


def test_another_model_drops_the_old_vectors_and_starts_over(vault, model_dirs):
    first = embed_index(vault, model=model_dirs[FP32])
    report = embed_index(vault, model=model_dirs[INT8], limit=3)
    assert report.dropped == 10 and report.dropped_model["name"] == "all-minilm-l6-v2-int8".replace("int8", "fp32")
    assert (report.embedded, report.remaining) == (3, 7)
    conn = open_active(vault)
    try:
        identity = stored_identity(get_meta(conn)["dense_model"])
    finally:
        conn.close()
    assert identity["name"] == "all-minilm-l6-v2-int8" and first.model_name == "all-minilm-l6-v2-fp32"


def test_legacy_index_is_embedded_in_place(make_vault, model_dirs):
    vault = make_vault(vault_files(), in_place=True)
    report = embed_index(vault, model=model_dirs[FP32], limit=5)
    assert (report.index_kind, report.generations_published, report.embedded) == ("legacy_db", [], 5)
    results = search_vault(vault, "dog playing", mode="semantic", allow_fallback=True)
    assert results.fallback_reason == "dense_incomplete" and results.index.kind == "legacy_db"


def test_a_missing_model_fails_before_touching_the_index(vault, tmp_path):
    before = active_id(vault)
    with pytest.raises(ModelMissingError):
        embed_index(vault, model=tmp_path / "no-such-model")
    assert active_id(vault) == before


def test_cli_index_embed_and_embed_only_with_limit(make_vault, model_dirs, capsys):
    vault = make_vault(vault_files(), build=False)
    assert main(["index", str(vault), "--embed", "--embed-limit", "3", "--model", str(model_dirs[FP32]), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["build"]["notes"] == 10 and out["embed"]["embedded"] == 3
    assert main(["index", str(vault), "--embed-only", "--json"]) == 0  # the index's model by default
    out = json.loads(capsys.readouterr().out)
    assert "build" not in out and out["embed"]["embedded"] == 7 and out["embed"]["complete"]
    assert out["embed"]["model_ref"] == str(model_dirs[FP32].resolve())


def test_cli_embed_limit_without_embed_is_a_usage_error(vault, capsys):
    assert main(["index", str(vault), "--embed-limit", "3"]) == 2
    assert "--embed" in capsys.readouterr().err


def test_cli_models_lists_presets_with_local_presence(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    assert main(["models", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["presets"]
    assert out["installed"] == [] and out["defaults"] == {}
    assert {r["name"] for r in rows} >= {"bge-m3", "bge-reranker-base"}
    assert all(r["present"] is False for r in rows)
