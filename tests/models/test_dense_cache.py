"""DenseMatrixCache (keys, generations, byte bound) and exact cosine top-k on tiny hand-made matrices."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from core.dense import CacheStats, DenseCacheKey, DenseMatrix, DenseMatrixCache

SHA_A, SHA_B = "a" * 64, "b" * 64


def matrix(rows: int, dim: int = 4, seed: int = 0) -> DenseMatrix:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((rows, dim)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return DenseMatrix(m, np.arange(rows, dtype=np.int64) + 100, np.arange(rows, dtype=np.int64) // 2)


class CountingLoader:
    def __init__(self, value: DenseMatrix) -> None:
        self.value, self.calls = value, 0

    def __call__(self) -> DenseMatrix:
        self.calls += 1
        return self.value


def key(vault: str = "/v", gen: str = "g1", sha: str = SHA_A) -> DenseCacheKey:
    return DenseCacheKey(vault, gen, sha)


# ---------------------------------------------------------------- keys and values


def test_key_refuses_a_legacy_index_without_generation_or_sha():
    with pytest.raises(TypeError):
        DenseCacheKey("/v", None, SHA_A)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        DenseCacheKey("/v", "g1", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        DenseCacheKey("/v", "", SHA_A)
    with pytest.raises(ValueError):
        DenseCacheKey("/v", "g1", "not-a-digest")


def test_key_for_a_resolved_index(tmp_path):
    layout = SimpleNamespace(vault=tmp_path)
    gen = SimpleNamespace(kind="immutable_generation", layout=layout, generation_id="g7", sha256=SHA_B)
    assert DenseCacheKey.for_index(gen) == DenseCacheKey(str(Path(tmp_path).resolve()), "g7", SHA_B)
    legacy = SimpleNamespace(kind="legacy_db", layout=layout, generation_id=None, sha256=None)
    with pytest.raises(ValueError):
        DenseCacheKey.for_index(legacy)


def test_matrix_holds_only_typed_arrays_and_is_read_only():
    value = matrix(3)
    assert value.nbytes == 3 * 4 * 4 + 3 * 8 * 2
    with pytest.raises(ValueError):
        value.matrix[0, 0] = 1.0
    with pytest.raises(ValueError):
        DenseMatrix(np.zeros((2, 4)), np.arange(2, dtype=np.int64), np.arange(2, dtype=np.int64))  # float64
    with pytest.raises(ValueError):
        DenseMatrix(np.zeros((2, 4), np.float32), np.arange(3, dtype=np.int64), np.arange(2, dtype=np.int64))
    with pytest.raises(ValueError):
        DenseMatrix(np.zeros((2, 4), np.float32), np.arange(2, dtype=np.int32), np.arange(2, dtype=np.int64))


# ---------------------------------------------------------------- cache behaviour


def test_repeated_gets_load_once():
    cache, loader = DenseMatrixCache(10_000), CountingLoader(matrix(4))
    first = cache.get_or_load(key(), loader)
    assert cache.get_or_load(key(), loader) is first
    assert cache.get_or_load(key(), loader) is first
    assert loader.calls == 1
    assert cache.stats == CacheStats(loads=1, hits=2, evictions=0)


def test_new_generation_loads_exactly_once_more_and_evicts_the_old_one():
    cache = DenseMatrixCache(10_000)
    old, new = CountingLoader(matrix(4, seed=1)), CountingLoader(matrix(5, seed=2))
    cache.get_or_load(key(gen="g1", sha=SHA_A), old)
    cache.get_or_load(key(gen="g2", sha=SHA_B), new)
    cache.get_or_load(key(gen="g2", sha=SHA_B), new)
    assert (old.calls, new.calls) == (1, 1)
    assert key(gen="g1", sha=SHA_A) not in cache and key(gen="g2", sha=SHA_B) in cache
    assert cache.stats == CacheStats(loads=2, hits=1, evictions=1)
    assert len(cache) == 1 and cache.current_bytes == matrix(5).nbytes


def test_same_generation_with_another_database_digest_is_a_different_entry():
    cache = DenseMatrixCache(10_000)
    loader = CountingLoader(matrix(4))
    cache.get_or_load(key(sha=SHA_A), loader)
    cache.get_or_load(key(sha=SHA_B), loader)  # the file changed under the same id
    assert loader.calls == 2 and len(cache) == 1


def test_other_vaults_are_kept_until_the_byte_bound_then_lru_goes_first():
    one = matrix(4).nbytes  # 128 bytes each
    cache = DenseMatrixCache(2 * one)
    cache.get_or_load(key("/a"), CountingLoader(matrix(4)))
    cache.get_or_load(key("/b"), CountingLoader(matrix(4)))
    cache.get_or_load(key("/a"), CountingLoader(matrix(4)))  # /a is now most recently used
    cache.get_or_load(key("/c"), CountingLoader(matrix(4)))
    assert key("/a") in cache and key("/c") in cache and key("/b") not in cache
    assert cache.current_bytes <= cache.max_bytes
    assert cache.stats.evictions == 1


def test_an_entry_larger_than_the_bound_is_served_but_not_kept():
    cache = DenseMatrixCache(100)
    big = CountingLoader(matrix(10))  # 320 bytes
    assert cache.get_or_load(key(), big) is big.value
    assert cache.get_or_load(key(), big) is big.value
    assert big.calls == 2 and len(cache) == 0 and cache.stats.hits == 0


def test_concurrent_requests_for_one_key_load_once():
    cache, loader = DenseMatrixCache(10_000), CountingLoader(matrix(4))
    threads = [threading.Thread(target=cache.get_or_load, args=(key(), loader)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loader.calls == 1 and cache.stats.hits == 7


def test_bad_keys_and_loaders_are_refused():
    cache = DenseMatrixCache(1000)
    with pytest.raises(TypeError):
        cache.get_or_load(("/v", "g1", SHA_A), CountingLoader(matrix(2)))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        cache.get_or_load(key(), lambda: np.zeros((2, 2), np.float32))  # type: ignore[arg-type,return-value]
    assert len(cache) == 0
