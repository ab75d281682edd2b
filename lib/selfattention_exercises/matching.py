"""Exercises of :ref:`ch-matching`, Matching and motion."""

from __future__ import annotations

from .core import Exercise, answered, call

__all__ = ["check_consistency", "check_pyramid", "check_bilinear_lookup",
           "check_soft_argmax", "check_window", "check_landing"]


# ------------------------------------------------------------------ 10.1
def _consistency_run(my_consistent, C):
    return call(my_consistent, C, what="my_consistent")


check_consistency = Exercise(
    "ex-matching-consistency", kind="Implement", points=2,
    answers=("my_consistent",),
    run=_consistency_run, seed=98,
    success="each left pixel's match, asked in turn from the right image's "
            "side of the same volume, points back within one pixel.",
    doc="Exercise 11.1: the left-right consistency check, on rows of "
        "made-up scenes with occlusions.")


# ------------------------------------------------------------------ 10.2
def _pyramid_run(my_pyramid_entries, my_correlation_macs, H, W, levels, D,
                 radius, updates):
    entries = call(my_pyramid_entries, H, W, levels,
                   what="my_pyramid_entries")
    macs = call(my_correlation_macs, H, W, D, levels, radius, updates,
                what="my_correlation_macs")
    return entries, macs


check_pyramid = Exercise(
    "ex-matching-pyramid", kind="Derive", points=1,
    answers=("my_pyramid_entries", "my_correlation_macs"), run=_pyramid_run,
    seed=92,
    written="show that the whole pyramid holds less than 4/3 of its finest "
            "level and what that means for RAFT's memory; show that "
            "correlations computed on demand equal the pyramid's, and find "
            "the feature map beyond which they cost fewer multiply-adds",
    written_points=2,
    success="H·W · Σₖ ⌊H/2ᵏ⌋·⌊W/2ᵏ⌋ entries, (HW)²·D multiply-adds to "
            "build and updates · HW · levels · (2r + 1)² · D on demand.",
    doc="Exercise 11.2: entries of a correlation pyramid, and the "
        "multiply-adds of building it against computing its lookups on "
        "demand.")


# ------------------------------------------------------------------ 10.3
def _bilinear_run(my_bilinear_lookup, C, flow, radius):
    return call(my_bilinear_lookup, C, flow, radius,
                what="my_bilinear_lookup")


check_bilinear_lookup = Exercise(
    "ex-matching-bilinear", kind="Implement", points=2,
    answers=("my_bilinear_lookup",),
    run=_bilinear_run, seed=93,
    # Interpolation at real-valued points, written by others: SciPy's
    # (map_coordinates wraps around with mode="grid-wrap") and PyTorch's
    # grid_sample, which RAFT uses (on a volume padded circularly).
    references=("scipy.ndimage", "scipy.interpolate",
                "torch.nn.functional.grid_sample"),
    success="whole-pixel flows read exactly the chapter's lookup; between "
            "pixels the four neighbours are mixed by their closeness.",
    doc="Exercise 11.3: the lookup at real-valued flow, bilinear.")


# ------------------------------------------------------------------ 10.4
def _soft_run(my_local_soft_argmax, C, temperature, radius):
    return call(my_local_soft_argmax, C, temperature, radius,
                what="my_local_soft_argmax")


check_soft_argmax = Exercise(
    "ex-matching-soft-argmax", kind="Implement", points=1,
    answers=("my_local_soft_argmax",), run=_soft_run,
    seed=96,
    written="measure the held-out EPE of the windowed soft-argmax against "
            "the global one and winner-take-all; why does the window help "
            "at warm temperatures, how far can its mean stray from the "
            "winner, and what does it give up?",
    written_points=2,
    success="the expected disparity and its spread over the window around "
            "each pixel's winner, stable for a sharp temperature.",
    doc="Exercise 11.4: soft-argmax over a window around the winner, and "
        "its spread.")


# ------------------------------------------------------------------ 10.5
def _window_run(my_window_scores, left, right, truth, k, rows):
    return call(my_window_scores, left, right, truth, k, rows,
                what="my_window_scores")


check_window = Exercise(
    "ex-matching-window", kind="Experiment", points=1,
    answers=("my_window_scores",), run=_window_run,
    seed=97,
    written="which window wins, where do small and large windows fail on "
            "the image, and what can one scene not tell you about the "
            "choice?",
    written_points=3,
    success="winner-take-all on k × k patches of the images given, scored "
            "on the rows given.",
    doc="Exercise 11.5: the patch size of winner-take-all, by EPE, on "
        "noisy bands cut anywhere from the pair.")


# ------------------------------------------------------------------ 10.6
def _landing_run(prediction, my_matches, seed, dy, dx):
    D = call(my_matches, seed, dy, dx, what="my_matches")
    answered(prediction, "your predicted fraction, a number from 0 to 1",
             "prediction")
    return prediction, D


check_landing = Exercise(
    "ex-matching-landing", kind="Predict", points=2,
    answers=("prediction", "my_matches"),
    run=_landing_run, seed=95,
    written="compare your prediction with what you measured: why does a "
            "shift of a pixel or two defeat patch matching here, and what "
            "in RAFT copes with motions between feature pixels?",
    written_points=2,
    success="the measured matches are right; now set the fraction that "
            "lands on the nearest whole-patch shift beside your prediction.",
    doc="Exercise 11.6: where patches land when the motion is not a whole "
        "number of patches.")
