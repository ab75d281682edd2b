"""The non-local operation, its masks, and the gated PyTorch block."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from selfattention.data import moving_square_video
from selfattention.nonlocal_block import NonLocalBlock, nonlocal_op, scope_mask


def random_map(seed, batch=(), T=2, H=2, W=3, C=4, d=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((*batch, T, H, W, C))
    Ws = [rng.standard_normal((C, d)) for _ in range(3)]
    return X, Ws


# ------------------------------------------------------------ scopes
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
def test_scope_masks_count_frames_and_places(T, H, W):
    N = T * H * W
    assert scope_mask(T, H, W, "spacetime").sum(axis=1).tolist() == [N] * N
    space, time = scope_mask(T, H, W, "space"), scope_mask(T, H, W, "time")
    assert space.sum(axis=1).tolist() == [H * W] * N
    assert time.sum(axis=1).tolist() == [T] * N
    # only a position itself is in the same frame AND the same place
    assert ((space & time) == np.eye(N, dtype=bool)).all()


def test_time_scope_links_the_same_place_across_frames():
    m = scope_mask(3, 2, 2, "time")
    assert m[1].nonzero()[0].tolist() == [1, 5, 9]


# ------------------------------------------------------------ the operation
@given(st.integers(0, 10**6), st.sampled_from(["spacetime", "space", "time"]))
def test_embedded_gaussian_agrees_with_pytorch_attention_at_scale_one(seed,
                                                                      scope):
    X, (Wt, Wp, Wg) = random_map(seed, batch=(2,))
    Y, F = nonlocal_op(X, Wt, Wp, Wg, scope=scope)
    x = torch.from_numpy(X.reshape(2, -1, X.shape[-1]))
    q, k, v = (x @ torch.from_numpy(W) for W in (Wt, Wp, Wg))
    mask = torch.from_numpy(scope_mask(*X.shape[1:4], scope))
    S = (q @ k.transpose(1, 2)).masked_fill(~mask, -torch.inf)
    A = torch.softmax(S, dim=-1)                    # PyTorch, scale 1
    Y_t = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=1.0)
    assert np.abs(F - A.numpy()).max() < 1e-10
    assert np.abs(Y.reshape(Y_t.shape) - Y_t.numpy()).max() < 1e-10


@given(st.integers(0, 10**6), st.sampled_from(["space", "time"]))
def test_dot_product_weights_are_the_scores_over_the_positions_in_scope(
        seed, scope):
    X, (Wt, Wp, Wg) = random_map(seed)
    Y_all, F_all = nonlocal_op(X, Wt, Wp, Wg, form="dot_product")
    Y, F = nonlocal_op(X, Wt, Wp, Wg, form="dot_product", scope=scope)
    mask = scope_mask(*X.shape[:3], scope)
    N, kept = mask.shape[0], mask.sum(axis=1, keepdims=True)
    # the same scores, zero outside the scope, divided by the keys kept
    assert np.allclose(F, np.where(mask, F_all * N / kept, 0.0))
    # no softmax: the weights scale with θ and need not sum to one
    _, F2 = nonlocal_op(X, 2 * Wt, Wp, Wg, form="dot_product", scope=scope)
    assert np.allclose(F2, 2 * F)
    assert np.allclose(Y.reshape(N, -1), F @ (X.reshape(N, -1) @ Wg))


def test_space_scope_keeps_each_frame_to_itself():
    X, (Wt, Wp, Wg) = random_map(3, T=3)
    Y, _ = nonlocal_op(X, Wt, Wp, Wg, scope="space")
    for t in range(3):
        Yt, _ = nonlocal_op(X[t:t + 1], Wt, Wp, Wg)
        assert np.allclose(Y[t], Yt[0])


def test_query_on_the_moving_square_finds_it_in_every_frame():
    from selfattention.patches import patchify

    v = moving_square_video(np.random.default_rng(0))
    X = patchify(v, 4).reshape(4, 6, 6, 16)
    Y, F = nonlocal_op(X, np.eye(16), np.eye(16), np.eye(16))
    mass = F[7].reshape(4, 36).sum(1)               # frame 0, patch (1, 1)
    assert np.allclose(mass, 0.25, atol=0.06)
    _, F_space = nonlocal_op(X, np.eye(16), np.eye(16), np.eye(16),
                             scope="space")
    assert np.allclose(F_space[7].reshape(4, 36).sum(1), [1, 0, 0, 0])


@pytest.mark.parametrize("kwargs, error, name", [
    ({"X": np.zeros((2, 2, 4))}, ValueError, "X"),
    ({"X": "video"}, TypeError, "X"),
    ({"X": np.full((2, 2, 3, 4), np.nan)}, ValueError, "X"),
    ({"W_theta": np.zeros((5, 3))}, ValueError, "W_theta"),
    ({"W_g": np.zeros(4)}, ValueError, "W_g"),
    ({"W_phi": np.zeros((4, 2))}, ValueError, "W_phi"),
    ({"form": "gaussian"}, ValueError, "form"),
    ({"scope": "frames"}, ValueError, "scope"),
])
def test_nonlocal_op_names_the_bad_argument(kwargs, error, name):
    X, (Wt, Wp, Wg) = random_map(0)
    args = {"X": X, "W_theta": Wt, "W_phi": Wp, "W_g": Wg, **kwargs}
    with pytest.raises(error, match=rf"\b{name}\b"):
        nonlocal_op(**args)


@pytest.mark.parametrize("call, error, name", [
    (lambda: scope_mask(2.0, 2, 2), TypeError, "T"),
    (lambda: scope_mask(2, 0, 2), ValueError, "H"),
    (lambda: scope_mask(2, 2, 2, "everything"), ValueError, "scope"),
])
def test_helpers_name_the_bad_argument(call, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        call()


# ------------------------------------------------------------ the PyTorch block
def numpy_weights(block):
    return [m.weight.detach().numpy().T
            for m in (block.theta, block.phi, block.g, block.out)]


@pytest.mark.parametrize("form", ["embedded_gaussian", "dot_product"])
def test_block_matches_numpy_once_the_gate_is_open(form):
    torch.manual_seed(0)
    block = NonLocalBlock(6, inner=4, form=form).double()
    with torch.no_grad():
        block.gamma.fill_(0.7)
    x = torch.randn(2, 6, 3, 2, 4, dtype=torch.float64)
    Wt, Wp, Wg, Wz = numpy_weights(block)
    X = x.numpy().transpose(0, 2, 3, 4, 1)          # (B, T, H, W, C)
    Y, F = nonlocal_op(X, Wt, Wp, Wg, form=form)
    out = block(x).detach().numpy().transpose(0, 2, 3, 4, 1)
    assert np.abs(out - (X + 0.7 * Y @ Wz)).max() < 1e-12


def test_block_is_the_identity_at_initialisation_for_images_and_videos():
    torch.manual_seed(1)
    block = NonLocalBlock(8)
    assert block.gamma.item() == 0.0 and block.theta.out_features == 4
    for shape in [(2, 8, 5, 5), (1, 8, 3, 4, 4)]:
        x = torch.randn(shape)
        assert torch.equal(block(x), x)


def test_only_the_gate_learns_on_the_first_step_then_everything_does():
    torch.manual_seed(2)
    block = NonLocalBlock(4).double()
    x = torch.randn(2, 4, 3, 3, 3, dtype=torch.float64)
    target = x + x.mean(dim=(2, 3, 4), keepdim=True)
    opt = torch.optim.SGD(block.parameters(), lr=1.0)
    for step in range(2):
        opt.zero_grad()
        ((block(x) - target) ** 2).mean().backward()
        others = [p.grad.abs().max().item() for name, p in
                  block.named_parameters() if name != "gamma"]
        assert block.gamma.grad.item() != 0.0
        assert (max(others) == 0.0) == (step == 0)
        opt.step()
    assert block.gamma.item() != 0.0


def test_block_names_bad_input():
    with pytest.raises(ValueError, match=r"\bform\b"):
        NonLocalBlock(4, form="concatenation")
    with pytest.raises(TypeError, match=r"\bchannels\b"):
        NonLocalBlock(4.0)
    with pytest.raises(ValueError, match=r"\binner\b"):
        NonLocalBlock(4, inner=0)
    with pytest.raises(ValueError, match=r"\bx\b"):
        NonLocalBlock(4)(torch.zeros(1, 3, 2, 2))
