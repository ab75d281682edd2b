"""Tests of selfattention.timing: the measurement helpers of chapter 7."""

import time
import tracemalloc

import numpy as np
import pytest

from selfattention import timing


def test_random_qkv_shapes_dtype_and_stream():
    Q, K, V = timing.random_qkv(5, 3, np.random.default_rng(0))
    for x in (Q, K, V):
        assert x.shape == (5, 3) and x.dtype == np.float32
    # the same draws, in the order Q, K, V, as three calls on one generator
    rng = np.random.default_rng(0)
    want = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(3)]
    for got, w in zip((Q, K, V), want):
        np.testing.assert_array_equal(got, w)
    assert not np.array_equal(Q, K)


def test_random_qkv_dtype_option():
    Q, _, _ = timing.random_qkv(2, 2, np.random.default_rng(1),
                                dtype=np.float64)
    assert Q.dtype == np.float64


@pytest.mark.parametrize("n, d, rng, err", [
    (0, 3, np.random.default_rng(0), ValueError),
    (2.5, 3, np.random.default_rng(0), TypeError),
    (4, -1, np.random.default_rng(0), ValueError),
    (4, 3, 0, TypeError),
])
def test_random_qkv_bad_input(n, d, rng, err):
    with pytest.raises(err):
        timing.random_qkv(n, d, rng)


def test_best_time_keeps_the_fastest_run_and_passes_arguments():
    calls = []

    def work(k, *, scale):
        calls.append((k, scale))
        end = time.process_time() + (0.02 if len(calls) == 1 else 0.0)
        while time.process_time() < end:     # busy: spends processor time
            pass

    t = timing.best_time(work, 7, scale=2, repeat=3)
    assert calls == [(7, 2)] * 3
    assert 0.0 <= t < 0.015                  # not the slow first run


def test_best_time_of_a_busy_loop_is_positive():
    def spin():
        end = time.process_time() + 0.01
        while time.process_time() < end:
            pass

    assert timing.best_time(spin, repeat=2) >= 0.009


@pytest.mark.parametrize("fn, repeat, err", [
    (None, 3, TypeError), (len, 0, ValueError), (len, 1.0, TypeError)])
def test_best_time_bad_input(fn, repeat, err):
    with pytest.raises(err):
        timing.best_time(fn, [], repeat=repeat)


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
