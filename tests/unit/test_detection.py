"""The detector's parts (``selfattention.detection``) against reference
constructions: the matching against every permutation, box IoU against
counted pixels, the cross-attention against ``torch.nn.MultiheadAttention``,
and the trained detector against the counts its recipe stored."""

import itertools

import numpy as np
import pytest
import torch

from selfattention.detection import (NO_OBJECT, CrossAttention, box_iou,
                                     box_shares, encoder_tokens,
                                     generalized_box_iou, match_queries,
                                     matching_cost, precision_recall)
from selfattention.object_attention import weight_inside
from selfattention.vit import TinyViT
from selfattention_models import photo_vit, trained


def _random_boxes(rng, k, side=20):
    """k integer boxes of at least one pixel inside a side × side image."""
    t, l = rng.integers(0, side - 1, size=(2, k))
    b = t + 1 + rng.integers(0, side - t)
    r = l + 1 + rng.integers(0, side - l)
    return np.stack([t, l, np.minimum(b, side), np.minimum(r, side)], 1)


def _pixels(box, side=20):
    mask = np.zeros((side, side), bool)
    mask[box[0]:box[2], box[1]:box[3]] = True
    return mask


@pytest.mark.parametrize("seed", range(20))
def test_box_iou_and_giou_count_pixels(seed):
    rng = np.random.default_rng(seed)
    a, b = _random_boxes(rng, 5), _random_boxes(rng, 4)
    iou = box_iou(a.astype(float), b.astype(float))
    giou = generalized_box_iou(a.astype(float), b.astype(float))
    for i, j in itertools.product(range(5), range(4)):
        A, B = _pixels(a[i]), _pixels(b[j])
        union = (A | B).sum()
        hull = _pixels(np.r_[np.minimum(a[i], b[j])[:2],
                             np.maximum(a[i], b[j])[2:]]).sum()
        assert iou[i, j] == pytest.approx((A & B).sum() / union)
        assert giou[i, j] == pytest.approx((A & B).sum() / union
                                           - (hull - union) / hull)


def test_giou_still_orders_boxes_that_do_not_meet():
    box = np.array([[0.0, 0.0, 2.0, 2.0]])
    near, far = np.array([[0.0, 3.0, 2.0, 5.0]]), np.array([[0.0, 9.0, 2.0,
                                                             11.0]])
    assert box_iou(box, near)[0, 0] == box_iou(box, far)[0, 0] == 0.0
    assert generalized_box_iou(box, near)[0, 0] > \
        generalized_box_iou(box, far)[0, 0]


@pytest.mark.parametrize("seed", range(30))
def test_matching_is_the_cheapest_of_all_assignments(seed):
    rng = np.random.default_rng(seed)
    N, k = 4, int(rng.integers(1, 5))
    cost = rng.normal(size=(N, k))
    q, j = match_queries(cost)
    best = min(itertools.permutations(range(N), k),
               key=lambda p: cost[list(p), range(k)].sum())
    assert np.array_equal(j, np.arange(k))
    assert cost[q, j].sum() == pytest.approx(cost[list(best),
                                                  range(k)].sum())
    assert np.array_equal(q, best)
    assert len(set(q)) == k


def test_the_query_that_gives_the_right_answer_costs_least():
    rng = np.random.default_rng(0)
    true = np.array([[0.1, 0.1, 0.4, 0.3], [0.5, 0.6, 0.9, 0.8]])
    labels = np.array([3, 7])
    boxes = rng.uniform(0, 1, size=(4, 4))
    boxes[:, 2:] = boxes[:, :2] + 0.2
    boxes[2], boxes[0] = true[0], true[1]
    probs = np.full((4, 11), 1 / 11)
    probs[2] = np.eye(11)[3]
    probs[0] = np.eye(11)[7]
    cost = matching_cost(probs, boxes, labels, true)
    assert cost.argmin(0).tolist() == [2, 0]
    q, j = match_queries(cost)
    assert q[j.argsort()].tolist() == [2, 0]


def test_matching_needs_a_query_for_every_object():
    with pytest.raises(ValueError, match="cost"):
        match_queries(np.zeros((2, 3)))


def test_boxes_need_four_numbers():
    with pytest.raises(ValueError, match="a"):
        box_iou(np.zeros((2, 3)), np.zeros((2, 4)))


def test_precision_recall_counts_boxes_of_the_right_class_and_place():
    true = np.array([[0.0, 0.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
    labels = np.array([4, 5])
    none = NO_OBJECT
    exact = precision_recall(np.array([5, none, 4, none]),
                             np.array([true[1], true[0], true[0], true[0]]),
                             labels, true)
    assert exact == (2, 2, 2)
    wrong_class = precision_recall(np.array([5, 5, none, none]),
                                   np.array([true[0], true[1], true[0],
                                             true[0]]), labels, true)
    assert wrong_class == (1, 2, 2)
    shifted = true[0] + [0, 6, 0, 6]             # IoU 4/16 with its digit
    assert precision_recall(np.array([4, none, none, none]),
                            np.array([shifted, true[0], true[0], true[0]]),
                            labels, true) == (0, 1, 2)
    twice = precision_recall(np.array([4, 4, none, none]),
                             np.array([true[0], true[0], true[0], true[0]]),
                             labels, true)
    assert twice == (1, 2, 2)                    # one digit, found twice


def test_a_uniform_map_puts_the_box_area_share_in_the_box():
    boxes = _random_boxes(np.random.default_rng(3), 6, side=56)
    shares = box_shares(boxes, 56, 7)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    np.testing.assert_allclose(weight_inside(np.ones_like(shares), shares),
                               area / 56 ** 2)
    np.testing.assert_allclose(shares.sum(1) * 49, area)


@pytest.mark.parametrize("h", [1, 4])
def test_cross_attention_is_torch_multihead_attention(h):
    torch.manual_seed(0)
    d = 16
    ours = CrossAttention(d, h).double()
    theirs = torch.nn.MultiheadAttention(d, h, batch_first=True).double()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q.weight, ours.k.weight,
                                               ours.v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q.bias, ours.k.bias,
                                             ours.v.bias]))
        theirs.out_proj.weight.copy_(ours.out.weight)
        theirs.out_proj.bias.copy_(ours.out.bias)
    q = torch.randn(3, 4, d, dtype=torch.float64)
    k = torch.randn(3, 9, d, dtype=torch.float64)
    v = torch.randn(3, 9, d, dtype=torch.float64)
    y, A = ours(q, k, v)
    y_ref, A_ref = theirs(q, k, v, need_weights=True,
                          average_attn_weights=False)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(A, A_ref)


def test_encoder_tokens_are_the_vit_blocks_output_after_its_norm():
    torch.manual_seed(1)
    vit = TinyViT(n=16, d_in=4, d=32, h=4, depth=2).double().eval()
    x = torch.randn(2, 16, 4, dtype=torch.float64)
    seen = {}
    vit.blocks[-1].register_forward_hook(
        lambda m, i, out: seen.update(z=out[0]))
    logits = vit(x)[0]
    tokens = encoder_tokens(vit, x)
    torch.testing.assert_close(tokens, vit.ln(seen["z"])[:, 1:])
    torch.testing.assert_close(vit.head(vit.ln(seen["z"])[:, 0]), logits)


def test_the_decoder_answers_every_query_with_a_box_inside_the_image():
    torch.manual_seed(2)
    decoder = photo_vit.detector_model(torch.float64)
    logits, boxes, maps = decoder(torch.randn(5, 64, 64,
                                              dtype=torch.float64))
    assert logits.shape == (5, 4, 11) and boxes.shape == (5, 4, 4)
    assert maps.shape == (5, 2, 4, 4, 64)
    torch.testing.assert_close(maps.sum(-1), torch.ones(5, 2, 4, 4,
                                                        dtype=torch.float64))
    assert bool((boxes[..., 2:] >= boxes[..., :2]).all())


@pytest.mark.slow
def test_the_loaded_detector_counts_its_test_scenes_as_stored():
    from selfattention_training.photographs import detr_counts
    vit, decoder = photo_vit.load_detector()
    counts = detr_counts(vit.float(), decoder.float(),
                         photo_vit.detection_test_scenes(), torch.float32)
    stored = trained.load("clutter-detr")["test_counts"]
    assert np.abs(counts - stored).max() <= 2   # float32 on other CPUs
