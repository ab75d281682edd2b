"""The ``make train`` recipes of :ref:`ch-photographs`: the tiny ViT trained
on photographs by two objectives, and on digits pasted on photographs.

* ``photos-mim-<seed>`` and ``photos-which-<seed>`` (seeds 0, 1, 2): a
  :class:`~selfattention_models.photo_vit.MaskedViT` (width 64, 4 blocks of 4
  heads) sees 32 × 32 grey crops of the 17 training photographs
  (:func:`selfattention_models.photos.split_photographs`), each resized to
  384 pixels on its shorter side, cut into 4 × 4-pixel patches (64 tokens). It
  learns either to fill in half of the patches, hidden behind the mask token
  (``mim``, :func:`~selfattention_models.photo_vit.masked_patch_loss`), or
  to say which of the 17 photographs a crop comes from (``which``). Each file
  holds the weights, the loss of every step and the mean attention
  distance of every head on 500 crops of the 4 held-out photographs,
  unmasked (``distance``) and with half of the patches hidden
  (``distance_hidden``).
* ``clutter-vit`` and ``clutter-cnn``: one 28-pixel digit pasted on a
  56 × 56 crop (:func:`selfattention_models.scenes.digit_scenes`), 7 × 7-pixel
  patches for the ViT; ``test_correct`` counts the right answers on 1,000
  scenes of held-out photographs and held-out digits.
* ``clutter-vit-misconceptions``: no training; what
  :ref:`ch-misconceptions` measures on ``clutter-vit`` over those 1,000
  scenes (occlusion, input × gradient, blanking, head removal).
* ``clutter-detr``: four object queries
  (:class:`~selfattention_models.photo_vit.QueryDecoder`) over the tokens of
  ``clutter-vit``, both trained on scenes of one to three digits of 16 to
  22 pixels (:func:`selfattention_models.photo_vit.detection_scenes`);
  ``test_counts`` holds the true positives at IoU 0.5, the digits reported
  and the digits present on 500 held-out scenes; the encoder's weights are
  ``e/<name>``.

Every recipe is float32 on one thread from fixed seeds: it repeats bit for
bit on one machine. The ``-tiny`` recipes, float64 and a few steps, are
what ``make test`` retrains.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from selfattention import interpret
from selfattention_models.photos import random_crops, split_photographs
from selfattention.torch_bridge import torch_threads
from selfattention_models.photo_vit import (CROP, GRID, PATCH, ZOOM,
                                            clutter_inputs, clutter_model,
                                            clutter_scenes,
                                            clutter_test_scenes, hide_half,
                                            held_out_crops, masked_patch_loss,
                                            photo_model, photo_tokens)

from .recipes import recipe, weight_arrays


def _schedule(opt, steps, warmup=0.05):
    """Linear warm-up over ``warmup`` of the steps, then a cosine to 0."""
    warm = max(1, round(warmup * steps))

    def rate(step):
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
    return torch.optim.lr_scheduler.LambdaLR(opt, rate)


def _take_step(opt, sched, loss):
    """One optimiser and schedule step on ``loss``; the loss as a float."""
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    return loss.item()


def _distances(model, crops, hidden=None):
    """Mean attention distance (L, h) in pixels over ``crops``."""
    X = torch.from_numpy(photo_tokens(crops, PATCH)).to(
        next(model.parameters()).dtype)
    with torch.no_grad():
        maps = model(X, hidden)[1]
    return interpret.mean_attention_distance(maps.double().numpy(), GRID,
                                             PATCH)


def train_photos(objective, seed, steps, batch=128, lr=2e-3,
                 dtype=torch.float32, threads=1, held_out=500):
    """Train a :class:`~selfattention_models.photo_vit.MaskedViT` on crops of
    the training photographs:
    ``objective`` ``"mim"`` fills in the hidden half of the patches,
    ``"which"`` names the photograph. Returns the recipe's arrays, with
    the distances measured on ``held_out_crops(held_out)``."""
    names = list(split_photographs()[0])
    rng = np.random.default_rng(seed)
    with torch_threads(threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = photo_model(len(names)).to(dtype)
        opt = torch.optim.AdamW(model.parameters(), lr, weight_decay=0.05)
        sched = _schedule(opt, steps)
        losses = np.empty(steps, np.float32)
        model.train()
        for step in range(steps):
            crops, source = random_crops(rng, names, batch, CROP, ZOOM)
            x = torch.from_numpy(photo_tokens(crops, PATCH)).to(dtype)
            if objective == "mim":
                hidden = hide_half(rng, batch, x.shape[1])
                pred = model.reconstruct(x, hidden)[0]
                loss = masked_patch_loss(pred, x, hidden)
            else:
                loss = nn.functional.cross_entropy(
                    model(x)[0], torch.from_numpy(source))
            losses[step] = _take_step(opt, sched, loss)
        model.eval()
        crops = held_out_crops(held_out)
        hidden = hide_half(np.random.default_rng(1001), len(crops),
                           GRID[0] * GRID[1])
        distance = _distances(model, crops)
        distance_hidden = _distances(model, crops, hidden)
    return {**weight_arrays(model), "loss": losses, "distance": distance,
            "distance_hidden": distance_hidden}


def _photo_recipe(objective, seed):
    @recipe(f"photos-{objective}-{seed}")
    def train_one():
        return train_photos(objective, seed, steps=1000)
    train_one.__doc__ = (f"The photographs' ViT, objective {objective!r}, "
                         f"seed {seed}: 1,000 steps of 128 crops.")
    return train_one


for _objective in ("mim", "which"):
    for _seed in range(3):
        _photo_recipe(_objective, _seed)


def _curves(arrays):
    """A recipe's arrays without its weights: what a tiny recipe keeps, so
    that its file stays small; the losses and measurements that remain
    depend on every weight."""
    return {k: v for k, v in arrays.items()
            if not k.startswith(("w/", "e/"))}


@recipe("photos-mim-tiny", rtol=0.0, atol=1e-6,
                retrained_by_test=True)
def photos_mim_tiny():
    """Ten float64 steps of 16 crops of the masked-patch recipe, its losses
    and distances kept: what ``make test`` retrains to check that
    :func:`train_photos` still gives the same numbers."""
    return _curves(train_photos("mim", 0, steps=10, batch=16,
                                dtype=torch.float64, held_out=50))


# ------------------------------------------------------------------ clutter
def _logits(out):
    return out[0] if isinstance(out, tuple) else out


def train_clutter(kind, seed, steps, batch=128, lr=2e-3,
                  dtype=torch.float32, threads=1, test_scenes=1000):
    """Train ``kind`` to name the digit of
    :func:`~selfattention_models.photo_vit.clutter_scenes`; returns
    the recipe's arrays, with the right answers on
    ``clutter_test_scenes(test_scenes)``."""
    rng = np.random.default_rng(seed)
    with torch_threads(threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = clutter_model(kind, dtype)
        opt = torch.optim.AdamW(model.parameters(), lr, weight_decay=0.05)
        sched = _schedule(opt, steps)
        losses = np.empty(steps, np.float32)
        model.train()
        for step in range(steps):
            s = clutter_scenes(rng, batch)
            logits = _logits(model(clutter_inputs(kind, s.images,
                                                  dtype=dtype)))
            loss = nn.functional.cross_entropy(
                logits, torch.from_numpy(s.labels[:, 0]))
            losses[step] = _take_step(opt, sched, loss)
        model.eval()
        test = clutter_test_scenes(test_scenes)
        with torch.no_grad():
            logits = _logits(model(clutter_inputs(kind, test.images,
                                                  dtype=dtype)))
        correct = int((logits.argmax(1).numpy() == test.labels[:, 0]).sum())
    return {**weight_arrays(model), "loss": losses,
            "test_correct": np.int64(correct)}


@recipe("clutter-vit")
def clutter_vit():
    """The clutter ViT: 2,500 steps of 128 scenes."""
    return train_clutter("vit", 0, steps=2500)


@recipe("clutter-cnn")
def clutter_cnn():
    """The CNN of :ref:`ch-transformer` on the clutter task: 2,500 steps."""
    return train_clutter("cnn", 0, steps=2500)


@recipe("clutter-vit-tiny", rtol=0.0, atol=1e-6,
                retrained_by_test=True)
def clutter_vit_tiny():
    """Ten float64 steps of 16 scenes of the clutter recipe, its losses and
    count kept: what ``make test`` retrains to check that
    :func:`train_clutter` still gives the same numbers."""
    return _curves(train_clutter("vit", 0, steps=10, batch=16,
                                 dtype=torch.float64, test_scenes=100))


# Rankings blanked by ``clutter-vit-misconceptions``, in the order of its
# ``removal`` rows; each random control comes in two orders.
CLUTTER_RANKINGS = ("layer 1", "layer 2", "layer 3", "layer 4", "rollout",
                    "in×grad", "occlusion", "digit", "random", "random",
                    "random digit", "random digit", "random background",
                    "random background")
CLUTTER_FILL = 0.5        # a blanked patch of a scene: mid-grey


@recipe("clutter-vit-misconceptions", after=("clutter-vit",))
def clutter_vit_misconceptions():
    """:func:`clutter_measures` on the 1,000 scenes of
    :func:`~selfattention_models.photo_vit.clutter_test_scenes`."""
    return clutter_measures(1000)


def clutter_measures(n_scenes):
    """What :ref:`ch-misconceptions` measures on the clutter ViT over the
    held-out scenes ``clutter_test_scenes(n_scenes)``, float64 on one
    thread (for 1,000 scenes, about 180,000 scenes through the model).

    ``in_x_grad`` (N, 64) and ``occlusion``, ``occluded_label`` (N, 64) as
    in ``vit-mnist-misconceptions``, a patch blanked to
    :data:`CLUTTER_FILL`; ``removal`` (14, 5): the scenes still right after
    blanking each scene's k first patches under each ranking of
    ``rankings`` (random orders from ``default_rng(11)``; *digit* ranks by
    the share of digit pixels, *random digit* and *random background* draw
    first among the patches with and without digit pixels), for k in
    ``blanked``; ``heads`` (L, h) and ``pairs`` (L, 6): the scenes still
    right with one head, or two heads of one layer, removed.
    """
    from selfattention.object_attention import patch_shares
    from selfattention.vit import forward
    from selfattention_models.photo_vit import (DIGIT_PATCH,
                                                clutter_test_scenes,
                                                load_clutter_model)
    model = load_clutter_model("clutter-vit")
    test = clutter_test_scenes(n_scenes)
    X = clutter_inputs("vit", test.images, dtype=torch.float64).numpy()
    y, N = test.labels[:, 0], len(test.labels)
    blanked = (1, 2, 4, 8, 16)
    with torch_threads(1):
        maps = forward(model, X)[1]              # (N, L, h, 1+n, 1+n)
        in_x_grad = (X * interpret.logit_gradient(model, X)).sum(-1)
        drop, label = interpret.occlusion(model, X, CLUTTER_FILL)
        digit = patch_shares((test.segments > 0).astype(float), DIGIT_PATCH)
        draws = np.random.default_rng(11).random((2, *digit.shape))
        scores = [*(interpret.cls_attention(maps, layer)
                    for layer in range(maps.shape[1])),
                  interpret.rollout(maps)[:, 0, 1:], np.abs(in_x_grad),
                  drop, digit, *draws, *(d + (digit > 0) for d in draws),
                  *(d + (digit == 0) for d in draws)]
        del maps
        removal = [interpret.removal_curve(model, X, y, s, blanked,
                                           CLUTTER_FILL) for s in scores]
        heads = interpret.head_ablation(model, X, y)
        pairs = interpret.pair_ablation(model, X, y)
    return {"in_x_grad": in_x_grad.astype(np.float32),
            "occlusion": drop.astype(np.float32),
            "occluded_label": label.astype(np.int8),
            "removal": np.array(removal, dtype=np.int64),
            "rankings": np.array(CLUTTER_RANKINGS),
            "blanked": np.array(blanked), "fill": np.float64(CLUTTER_FILL),
            "heads": np.round(heads * N).astype(np.int64),
            "pairs": np.round(pairs * N).astype(np.int64)}


# ---------------------------------------------------------------- detection
def _detr_targets(scenes):
    """Each scene's labels (k,) and boxes (k, 4) as fractions of the side."""
    side = scenes.images.shape[-1]
    return [(scenes.labels[i, :c], scenes.boxes[i, :c] / side)
            for i, c in enumerate(scenes.counts)]


def _detr_loss(logits, boxes, targets, no_object_weight=0.1):
    """Carion et al.'s loss: queries matched to objects by
    :func:`~selfattention.detection.match_queries`; cross-entropy on every
    query (unmatched ones to *no object*, weighted 0.1), and on matched
    ones 5 × L1 + 2 × (1 − GIoU) of the box, per object."""
    from selfattention.detection import (COST_WEIGHTS, NO_OBJECT, _iou_terms,
                            match_queries, matching_cost)
    B, N = logits.shape[:2]
    probs = logits.detach().double().softmax(-1).numpy()
    pred = boxes.detach().double().numpy()
    wanted = torch.full((B, N), NO_OBJECT, dtype=torch.int64)
    rows, cols = [], []
    for i, (labels, true) in enumerate(targets):
        q, j = match_queries(matching_cost(probs[i], pred[i], labels, true))
        wanted[i, q] = torch.from_numpy(labels[j])
        rows.append(np.stack([np.full(len(q), i), q], 1))
        cols.append(true[j])
    weight = torch.ones(logits.shape[-1], dtype=logits.dtype)
    weight[NO_OBJECT] = no_object_weight
    loss = nn.functional.cross_entropy(logits.flatten(0, 1),
                                       wanted.flatten(), weight)
    at = np.concatenate(rows)
    matched = boxes[at[:, 0], at[:, 1]]
    true = torch.from_numpy(np.concatenate(cols)).to(boxes.dtype)
    _, w_l1, w_giou = COST_WEIGHTS
    return (loss + w_l1 * (matched - true).abs().sum(-1).mean()
            + w_giou * (1 - _iou_terms(matched, true)[1]).mean())


def detr_counts(vit, decoder, scenes, dtype=torch.float64):
    """True positives, reported and objects at IoU 0.5 over ``scenes``."""
    from selfattention.detection import (detections, encoder_tokens,
                                         precision_recall)
    x = clutter_inputs("vit", scenes.images, dtype=dtype)
    with torch.no_grad():
        logits, boxes, _ = decoder(encoder_tokens(vit, x))
    side = scenes.images.shape[-1]
    classes = detections(logits.double().numpy())
    counts = [precision_recall(classes[i], boxes[i].double().numpy() * side,
                               scenes.labels[i, :c],
                               scenes.boxes[i, :c].astype(np.float64))
              for i, c in enumerate(scenes.counts)]
    return np.array(counts, np.int64).sum(0)


def train_detector(seed, steps, batch=64, lr=1e-3, dtype=torch.float32,
                   threads=1, test_scenes=500, tune_encoder=False):
    """Train a :func:`~selfattention_models.photo_vit.detector_model` on the
    clutter ViT's tokens (frozen unless ``tune_encoder``) of
    :func:`~selfattention_models.photo_vit.detection_scenes`; returns its
    weights, losses and counts (true positives, reported, objects) on
    ``detection_test_scenes(test_scenes)``. With ``tune_encoder`` the
    clutter ViT trains too, and its weights are kept as ``e/<name>``."""
    from selfattention.detection import encoder_tokens
    from selfattention_models.photo_vit import (detection_scenes,
                                                detection_test_scenes,
                                                detector_model,
                                                load_clutter_model)
    vit = load_clutter_model("clutter-vit").to(dtype)
    vit.requires_grad_(tune_encoder)
    rng = np.random.default_rng(seed)
    with torch_threads(threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        decoder = detector_model(dtype)
        params = list(decoder.parameters()) + (
            list(vit.parameters()) if tune_encoder else [])
        opt = torch.optim.AdamW(params, lr, weight_decay=0.05)
        sched = _schedule(opt, steps)
        losses = np.empty(steps, np.float32)
        decoder.train()
        for step in range(steps):
            s = detection_scenes(rng, batch)
            with torch.set_grad_enabled(tune_encoder):
                memory = encoder_tokens(vit, clutter_inputs(
                    "vit", s.images, dtype=dtype))
            logits, boxes, _ = decoder(memory)
            loss = _detr_loss(logits, boxes, _detr_targets(s))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 0.1)
            opt.step()
            sched.step()
            losses[step] = loss.item()
        decoder.eval()
        counts = detr_counts(vit, decoder, detection_test_scenes(test_scenes),
                             dtype)
    encoder = {f"e/{k[2:]}": v for k, v in weight_arrays(vit).items()}
    return {**weight_arrays(decoder), **(encoder if tune_encoder else {}),
            "loss": losses, "test_counts": counts}


@recipe("clutter-detr", after=("clutter-vit",))
def clutter_detr():
    """Four object queries over the clutter ViT, which trains on with them:
    3,000 steps of 64 scenes of one to three digits."""
    return train_detector(0, steps=3000, tune_encoder=True)


@recipe("clutter-detr-tiny", rtol=0.0, atol=1e-6,
                retrained_by_test=True, after=("clutter-vit",))
def clutter_detr_tiny():
    """Ten float64 steps of 8 scenes of the detector recipe, its losses and
    counts kept: what ``make test`` retrains to check that
    :func:`train_detector` still gives the same numbers."""
    return _curves(train_detector(0, steps=10, batch=8, dtype=torch.float64,
                                  test_scenes=50, tune_encoder=True))
