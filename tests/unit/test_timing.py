"""Tests of selfattention.timing: the measurement helpers of chapter 7."""

import time
import tracemalloc

import numpy as np
import pytest

from selfattention import timing


def test_random_qkv_shapes_dtype_and_reproducibility():
    Q, K, V = timing.random_qkv(5, 3, np.random.default_rng(0))
    for x in (Q, K, V):
        assert x.shape == (5, 3) and x.dtype == np.float32
    assert not np.array_equal(Q, K) and not np.array_equal(K, V)
    again = timing.random_qkv(5, 3, np.random.default_rng(0))
    for got, want in zip((Q, K, V), again):
        np.testing.assert_array_equal(got, want)       # same seed, same draw
    rng = np.random.default_rng(0)
    first = timing.random_qkv(5, 3, rng)
    assert not np.array_equal(first[0], timing.random_qkv(5, 3, rng)[0])


def test_random_qkv_dtype_option():
    Q, _, _ = timing.random_qkv(2, 2, np.random.default_rng(1),
                                dtype=np.float64)
    assert Q.dtype == np.float64


def test_best_time_keeps_the_fastest_run_and_passes_arguments(monkeypatch):
    # A clock that the calls below advance by 5, 1 and 2 seconds.
    ticks = iter([0.0, 5.0, 10.0, 11.0, 20.0, 22.0])
    monkeypatch.setattr(time, "process_time", lambda: next(ticks))
    calls = []

    def work(k, *, scale):
        calls.append((k, scale))

    assert timing.best_time(work, 7, scale=2, repeat=3) == 1.0
    assert calls == [(7, 2)] * 3


def test_peak_bytes_counts_numpy_buffers():
    n = 1_000_000
    peak = timing.peak_bytes(np.ones, n)      # 8 MB of float64
    assert 8 * n <= peak < 8 * n + 100_000
    # two buffers alive at once are both counted
    peak2 = timing.peak_bytes(lambda: (np.ones(n), np.zeros(n))[0].sum())
    assert peak2 >= 16 * n


def test_run_traced_returns_the_result_and_stops_tracing():
    result, peak = timing.run_traced(np.arange, 10, dtype=np.int64)
    np.testing.assert_array_equal(result, np.arange(10))
    assert peak >= 80
    assert not tracemalloc.is_tracing()


def test_run_traced_stops_tracing_when_fn_raises():
    def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        timing.run_traced(boom)
    assert not tracemalloc.is_tracing()


def test_run_traced_refuses_to_nest():
    tracemalloc.start()
    try:
        with pytest.raises(RuntimeError, match="^tracemalloc"):
            timing.peak_bytes(len, [])
    finally:
        tracemalloc.stop()


def test_run_traced_rejects_a_non_callable():
    with pytest.raises(TypeError, match="^fn"):
        timing.run_traced(3)
