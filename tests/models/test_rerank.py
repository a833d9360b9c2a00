"""CrossEncoder plumbing on the MiniLM "pair" fixture (the production interface; not a trained reranker)."""

from __future__ import annotations

import json

import numpy as np
import onnx  # noqa: F401  (the dense extra is installed for the tests)
import onnxruntime  # noqa: F401  (the dense extra is installed for the tests)
import pytest
import tokenizers  # noqa: F401  (the dense extra is installed for the tests)

from core.errors import ModelError  # noqa: E402
from core.models.local import load_local_dir  # noqa: E402
from core.rerank import CrossEncoder  # noqa: E402
from tests.minilm_fixture import FP32, PAIR, variant_dir  # noqa: E402

QUERY = "How do cats sleep during the day?"
RELEVANT = "Cats sleep for many hours during the day, often curled up in a warm sunny spot."
UNRELATED = "The central bank raised interest rates by a quarter point on Tuesday."
FILLER = " Tariff schedules, bond yields and quarterly earnings were discussed at length." * 40  # ~600 tokens


@pytest.fixture(scope="module")
def reranker(model_dirs):
    return CrossEncoder(load_local_dir(model_dirs[PAIR], kind="reranker"), threads=1)


def test_relevant_passage_scores_above_unrelated(reranker):
    scores = reranker.score(QUERY, [UNRELATED, RELEVANT])
    assert scores.dtype == np.float32 and scores.shape == (2,)
    assert scores[1] > scores[0] + 0.2


def test_batched_scores_equal_single_scores_in_input_order(reranker):
    passages = [UNRELATED, RELEVANT + FILLER, RELEVANT, "cats"]
    batched = reranker.score(QUERY, passages, batch_size=3)
    single = np.array([reranker.score(QUERY, [p])[0] for p in passages])
    assert np.abs(batched - single).max() < 1e-5
    assert reranker.score(QUERY, []).shape == (0,)


def plain_ids(model_dirs, text):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dirs[PAIR] / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()  # the file pads to 128
    return tokenizer.encode(text, add_special_tokens=False).ids


def test_long_passage_is_truncated_and_the_query_survives(reranker, model_dirs):
    feeds = reranker.tokenize(QUERY, [RELEVANT + FILLER])
    assert feeds["input_ids"].shape == (1, 256)  # cut to max_length
    query_ids = plain_ids(model_dirs, QUERY)
    segment_a = feeds["input_ids"][0][feeds["token_type_ids"][0] == 0].tolist()
    assert segment_a[1:-1] == query_ids  # [CLS] query [SEP], whole
    scores = reranker.score(QUERY, [UNRELATED + FILLER, RELEVANT + FILLER])
    assert scores[1] > scores[0]


def test_overlong_query_is_clipped_instead_of_failing(reranker, model_dirs):
    long_query = QUERY + " and also" * 400
    clipped = reranker.clip_query(long_query)
    assert long_query.startswith(clipped) and len(clipped) < len(long_query)
    assert len(plain_ids(model_dirs, clipped)) == 128
    scores = reranker.score(long_query, [RELEVANT, UNRELATED])
    assert np.isfinite(scores).all()
    assert reranker.clip_query(QUERY) == QUERY


def test_identity(reranker, model_dirs):
    ident = reranker.identity
    assert (ident["kind"], ident["name"], ident["max_length"], ident["output"]) == (
        "reranker",
        "minilm-pair-fixture",
        256,
        "logits",
    )
    assert json.loads(reranker.identity_key()) == ident


def test_wrong_output_name_is_a_model_error(model_dirs, tmp_path):
    d = variant_dir(model_dirs[PAIR], tmp_path / "v", output="scores")
    with pytest.raises(ModelError) as info:
        CrossEncoder(load_local_dir(d, kind="reranker"))
    assert info.value.evidence["outputs"] == ["logits"]


def test_an_encoder_graph_is_refused_as_a_reranker(model_dirs, tmp_path):
    d = variant_dir(model_dirs[FP32], tmp_path / "enc", kind="reranker", pooling=None, dim=None)
    with pytest.raises(ModelError) as info:  # [B, S, H] is not [B, 1]
        CrossEncoder(load_local_dir(d, kind="reranker"))
    assert info.value.reason == "model_invalid"


def test_an_embedding_model_dir_is_refused(model_dirs):
    with pytest.raises(ModelError):
        CrossEncoder(load_local_dir(model_dirs[FP32], kind="embedding"))
