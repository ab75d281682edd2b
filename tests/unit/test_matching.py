"""Cross-attention matching, correlation volumes and their lookup."""

import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from selfattention import interactive
from selfattention.attention import attention
from selfattention.data import shifted_pair, textured_scene
from selfattention.matching import (argmax_flow, correlation_volume,
                                    displacements, lookup, normalize,
                                    pixel_features)
from selfattention.patches import center, patchify


# ------------------------------------------------------------ displacements
def test_displacements_read_the_argmax_of_each_row():
    S = np.zeros((6, 6))                   # 2 x 3 grid
    S[0, 5] = 1.0                          # (0, 0) -> (1, 2)
    S[4, 0] = 1.0                          # (1, 1) -> (0, 0)
    D = displacements(S, (2, 3), periodic=False)
    assert D[0].tolist() == [1, 2] and D[4].tolist() == [-1, -1]
    Dp = displacements(S, (2, 3))
    assert Dp[0].tolist() == [-1, -1]      # wrapped into [-1, 1) x [-1, 2)


@given(st.integers(0, 10**6), st.integers(-4, 4), st.integers(-4, 4))
def test_cross_attention_recovers_a_whole_patch_shift(seed, dr, dc):
    rng = np.random.default_rng(seed)
    img1, img2 = shifted_pair(textured_scene(rng), (4 * dr, 4 * dc), rng)
    X1, X2 = (normalize(center(patchify(im, 4))) for im in (img1, img2))
    _, A = attention(X1, X2, X2, scale=16.0)
    D = displacements(A, (8, 8))
    agree = (D == [dr if dr < 4 else dr - 8, dc if dc < 4 else dc - 8])
    assert agree.all(axis=1).mean() >= 0.95


def test_normalize_gives_unit_rows_and_keeps_zero_rows():
    X = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert np.allclose(normalize(X), [[0.6, 0.8], [0.0, 0.0]])


# ---------------------------------------------------- correlation volume
def test_correlation_volume_is_a_score_matrix_between_frames():
    rng = np.random.default_rng(0)
    F1, F2 = rng.standard_normal((2, 3, 4, 5))
    C = correlation_volume(F1, F2)
    assert C.shape == (3, 4, 3, 4)
    assert np.isclose(C[1, 2, 0, 3], F1[1, 2] @ F2[0, 3])
    # every entry against PyTorch's einsum over the feature axis
    ref = torch.einsum("ijd,kld->ijkl", *map(torch.from_numpy, (F1, F2)))
    assert np.abs(C - ref.numpy()).max() < 1e-12


@pytest.mark.slow
@given(st.integers(0, 10**6), st.integers(-6, 6), st.integers(-6, 6))
def test_argmax_flow_recovers_any_pixel_shift(seed, dy, dx):
    rng = np.random.default_rng(seed)
    img1, img2 = shifted_pair(textured_scene(rng, size=16), (dy, dx), rng)
    flow = argmax_flow(correlation_volume(pixel_features(img1),
                                          pixel_features(img2)))
    assert (flow == [dy, dx]).all(axis=-1).mean() >= 0.95


def test_pixel_features_are_centred_unit_neighbourhoods():
    img = np.random.default_rng(0).random((8, 9))
    F = pixel_features(img, k=3)
    assert F.shape == (8, 9, 9)
    assert np.allclose(np.linalg.norm(F, axis=-1), 1)
    assert np.allclose(F.sum(axis=-1), 0)
    patch = img[2:5, 3:6].ravel()
    patch = patch - patch.mean()
    assert np.allclose(F[3, 4], patch / np.linalg.norm(patch))


def test_lookup_reads_a_window_around_the_flow():
    H, W, r = 5, 6, 1
    C = np.arange((H * W) ** 2, dtype=float).reshape(H, W, H, W)
    flow = np.zeros((H, W, 2), dtype=int)
    flow[2, 3] = (1, -2)
    L = lookup(C, flow, r)
    assert L.shape == (H, W, 9)
    assert L[2, 3, 4] == C[2, 3, 3, 1]            # centre: the flow target
    assert L[2, 3, 0] == C[2, 3, 2, 0]            # offset (-1, -1)
    assert L[0, 0, 0] == C[0, 0, H - 1, W - 1]    # wraps around
    assert np.array_equal(lookup(C, flow, 0)[..., 0], L[..., 4])


@pytest.mark.slow
@given(st.integers(0, 10**6), st.integers(-3, 3), st.integers(-3, 3))
def test_lookup_at_the_true_flow_peaks_at_its_centre(seed, dy, dx):
    rng = np.random.default_rng(seed)
    img1, img2 = shifted_pair(textured_scene(rng, size=16), (dy, dx), rng)
    C = correlation_volume(pixel_features(img1), pixel_features(img2))
    L = lookup(C, argmax_flow(C), 2)                 # (16, 16, 25)
    assert (np.argmax(L, axis=-1) == 12).all()


# ------------------------------------------------------------ bad input
F = np.zeros((3, 4, 5))
VOLUME = np.zeros((3, 4, 3, 4))
FLOW = np.zeros((3, 4, 2), dtype=int)


@pytest.mark.parametrize("call, error, name", [
    (lambda: normalize("tokens"), TypeError, "X"),
    (lambda: displacements(np.zeros((5, 6)), (2, 3)), ValueError, "S"),
    (lambda: displacements(np.zeros((6, 6)), (2, 3.0)), TypeError, "grid"),
    (lambda: displacements(np.zeros((6, 6)), 6), TypeError, "grid"),
    (lambda: displacements(np.zeros((6, 6)), (2, 3), "no"), TypeError,
     "periodic"),
    (lambda: pixel_features(np.zeros((8, 9)), k=4), ValueError, "k"),
    (lambda: pixel_features(np.zeros((8, 9)), k=11), ValueError, "k"),
    (lambda: pixel_features(np.zeros((2, 8, 9))), ValueError, "img"),
    (lambda: correlation_volume(F, F[:, :3]), ValueError, "F2"),
    (lambda: correlation_volume(F[0], F), ValueError, "F1"),
    (lambda: correlation_volume(F, np.full_like(F, np.inf)), ValueError,
     "F2"),
    (lambda: argmax_flow(np.zeros((3, 4, 4, 3))), ValueError, "C"),
    (lambda: lookup(VOLUME, FLOW.astype(float), 1), TypeError, "flow"),
    (lambda: lookup(VOLUME, FLOW[:2], 1), ValueError, "flow"),
    (lambda: lookup(VOLUME, FLOW, -1), ValueError, "radius"),
    (lambda: lookup(VOLUME, FLOW, 1.5), TypeError, "radius"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        call()


# ------------------------------------------------------------ frames_explorer
def test_frames_explorer_is_stable_and_checks_shapes():
    rng = np.random.default_rng(0)
    frames = rng.random((3, 8, 8))
    A = rng.random((12, 12))
    a = interactive.frames_explorer(frames, A, (2, 2), 4, query=5).data
    b = interactive.frames_explorer(frames, A, (2, 2), 4, query=5).data
    assert a == b and 'data-testid="frames-explorer"' in a
    assert '"cross":false' in a and "frame 2" in a
    cross = interactive.frames_explorer(frames[:1], A[:4, :8], (2, 2), 4,
                                        keys=frames[:2], title="a <b>",
                                        key_labels=["x", "y"]).data
    assert '"cross":true' in cross and "a &lt;b&gt;" in cross
    with pytest.raises(ValueError, match="A must have shape"):
        interactive.frames_explorer(frames, A[:, :8], (2, 2), 4)
    with pytest.raises(ValueError, match="frames must have shape"):
        interactive.frames_explorer(frames[:, :6], A, (2, 2), 4)
    with pytest.raises(ValueError, match="query"):
        interactive.frames_explorer(frames, A, (2, 2), 4, query=12)
    with pytest.raises(ValueError, match="labels"):
        interactive.frames_explorer(frames, A, (2, 2), 4, labels=["a"])


def test_frames_explorer_html_has_no_long_runs_without_spaces():
    # nbval's sanitizing regexes backtrack quadratically over such runs
    rng = np.random.default_rng(1)
    html = interactive.frames_explorer(rng.random((4, 24, 24)),
                                       rng.random((144, 144)), (6, 6), 4).data
    # the stills' PNGs are read by a sanitizer anchored on their prefix
    html = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "STILL", html)
    assert max(len(run) for run in html.split()) < 200
