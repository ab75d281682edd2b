"""Tests of selfattention.cost: the counts of chapter 7 and Swin's formulas."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfattention import cost


def test_vit_b16_input_gives_196_tokens_and_38416_entries():
    n = cost.tokens(224, 16)
    assert n == 196 == 14 * 14
    assert cost.score_entries(n) == 38_416


def test_one_token_per_pixel_gives_the_documented_numbers():
    n = cost.tokens(224, 1)
    assert n == 50_176
    assert cost.score_entries(n) == 2_517_630_976          # about 2.52 billion
    assert round(cost.attention_bytes(n, dtype="float32") / 1e9) == 10
    assert cost.score_entries(n) // cost.score_entries(196) == 65_536 == 256**2


def test_heads_keys_and_dtype_scale_the_counts():
    assert cost.score_entries(10, h=3) == 3 * cost.score_entries(10) == 300
    assert cost.score_entries(10, n_k=7) == 70
    assert cost.attention_bytes(10, h=2, dtype=np.float64) == 1600
    assert cost.attention_bytes(10, dtype="float16") == 200


@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 6))
def test_tokens_fall_with_the_square_of_the_patch_size(a, b, P):
    H, W = a * P * 2, b * P * 2
    assert cost.tokens((H, W), P) == a * b * 4
    assert cost.tokens((H, W), 2 * P) * 4 == cost.tokens((H, W), P)


def test_rectangular_patches_and_images():
    assert cost.tokens((32, 64), (4, 8)) == 64
    assert cost.tokens([6, 9], 3) == 6


def test_swin_setting_3136_tokens_and_64_fold_fewer_entries():
    n = cost.tokens(224, 4)
    assert n == 3136 == 56 * 56
    assert cost.score_entries(n) // cost.window_score_entries((56, 56), 7) \
        == 64
    assert cost.window_score_entries((56, 56), 7, h=3) == 3 * 3136 * 49


@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 64),
       st.integers(1, 7), st.integers(1, 4))
def test_windows_change_only_the_pair_term(a, b, C, M, h):
    grid = (a * M, b * M)
    n = grid[0] * grid[1]
    saved = cost.msa_macs(grid, C) - cost.window_msa_macs(grid, C, M)
    # the pair term: C multiply-adds per score entry, for QKᵀ and for AV
    entries = (cost.score_entries(n, h) - cost.window_score_entries(grid, M,
                                                                    h)) // h
    assert saved == 2 * C * entries >= 0
    # one window over the whole grid is global attention
    assert cost.window_msa_macs((M, M), C, M) == cost.msa_macs((M, M), C)


@pytest.mark.parametrize("call, error, name", [
    (lambda: cost.tokens(224, 15), ValueError, "patch_size"),
    (lambda: cost.tokens(224, 0), ValueError, "patch_size"),
    (lambda: cost.tokens(224.0, 16), TypeError, "image_size"),
    (lambda: cost.tokens((224, 224, 3), 16), TypeError, "image_size"),
    (lambda: cost.score_entries(-1), ValueError, "n"),
    (lambda: cost.score_entries(4, h=0), ValueError, "h"),
    (lambda: cost.score_entries(4, n_k=2.0), TypeError, "n_k"),
    (lambda: cost.attention_bytes(4, dtype="banana"), TypeError, "dtype"),
    (lambda: cost.attention_bytes(4, dtype=object), TypeError, "dtype"),
    (lambda: cost.msa_macs((0, 4), 8), ValueError, r"grid\[0\]"),
    (lambda: cost.msa_macs(56, 96), TypeError, "grid"),
    (lambda: cost.window_msa_macs((56, 56), 96, 5), ValueError, "M"),
    (lambda: cost.window_score_entries((14, 14), 4), ValueError, "M"),
    (lambda: cost.human_bytes(-1), ValueError, "nbytes"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=f"^{name}"):
        call()


def test_human_bytes_uses_decimal_units():
    assert cost.human_bytes(999) == "999 B"
    assert cost.human_bytes(153_664) == "153.66 kB"
    assert cost.human_bytes(cost.attention_bytes(50_176)) == "10.07 GB"
    assert cost.human_bytes(2 * 10**12) == "2.00 TB"


# ------------------------------------------------- slow-memory traffic
def walked_tiles(n, d, M):
    """The numbers FlashAttention's Algorithms 1 and 4 move, added up tile
    by tile as the loops run (a construction independent of the closed
    forms in the library)."""
    b_k = math.ceil(M / (4 * d))
    b_q = min(b_k, d)
    key_tiles = [min(b_k, n - j) for j in range(0, n, b_k)]
    query_tiles = [min(b_q, n - i) for i in range(0, n, b_q)]
    forward = n * d + 2 * n                      # O, l, m initialised
    backward = 3 * n * d                         # dQ, dK, dV initialised
    for bk in key_tiles:
        forward += 2 * bk * d                    # K_j, V_j
        backward += 2 * bk * d + 2 * bk * d      # K_j, V_j in; dK_j, dV_j
        for bq in query_tiles:
            forward += 2 * bq * d + 2 * bq       # Q_i, O_i, l_i, m_i in
            forward += bq * d + 2 * bq           # O_i, l_i, m_i out
            backward += 4 * bq * d + 2 * bq      # Q_i, O_i, dO_i, dQ_i, l, m
            backward += bq * d                   # dQ_i out
    return forward, backward


@given(st.integers(1, 400), st.integers(1, 128), st.integers(1, 60_000))
def test_tiled_traffic_is_what_the_tiles_of_the_algorithms_move(n, d, M):
    assert cost.tiled_attention_traffic(n, d, M) == walked_tiles(n, d, M)


@given(st.integers(1, 3000), st.integers(1, 256))
def test_the_standard_kernel_moves_the_score_matrix_through_memory(n, d):
    forward, backward = cost.standard_attention_traffic(n, d)
    # S and A each written once and read once; inputs and output once
    assert forward == 4 * n * n + 4 * n * d
    assert backward > forward > 4 * n * n


@given(st.integers(64, 4096), st.sampled_from([16, 32, 64, 128]),
       st.integers(0, 6))
def test_tiled_traffic_follows_theorem_2_between_d_and_nd(n, d, e):
    M = min(d * 2**e * 4, n * d)                 # d <= M <= n d
    forward, backward = cost.tiled_attention_traffic(n, d, M)
    bound = n * n * d * d / M
    # Θ(n² d² / M): within constant factors of the bound, both ways
    assert 2 * bound <= forward <= 30 * bound + 12 * n * d
    assert 2 * bound <= backward <= 50 * bound + 20 * n * d
    # more fast memory never moves more
    assert cost.tiled_attention_traffic(n, d, 2 * M)[0] <= forward
    assert cost.tiled_attention_traffic(n, d, 2 * M)[1] <= backward


def test_with_the_a100s_fast_memory_the_pixels_move_a_quarter():
    n, d, M = 224 * 224, 64, 192 * 1024 // 4
    tiled = cost.tiled_attention_traffic(n, d, M)
    standard = cost.standard_attention_traffic(n, d)
    assert 0.2 < tiled[0] / standard[0] < 0.3
    assert 0.2 < tiled[1] / standard[1] < 0.3
