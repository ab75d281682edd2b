"""Exercises of chapter 10, Matching and motion."""

from __future__ import annotations


from .core import (Exercise, answered, call)

__all__ = ["check_displacements", "check_pyramid", "check_bilinear_lookup",
           "check_context", "check_landing"]


# ------------------------------------------------------------------ 10.1
def _displacement_run(my_displacements, A, grid):
    return call(my_displacements, A, grid, what="my_displacements")


check_displacements = Exercise(
    "ex-matching-displacement", kind="Implement", points=1,
    answers=("my_displacements",),
    run=_displacement_run,
    references=("selfattention.matching.displacements",
                "selfattention.matching.argmax_flow"), seed=91,
    success="each query's strongest key, minus the query's own place, "
            "as (row, col).",
    doc="Exercise 10.1: displacement of each query's strongest key.")


# ------------------------------------------------------------------ 10.2
def _pyramid_run(my_pyramid_entries, H, W, levels):
    return call(my_pyramid_entries, H, W, levels, what="my_pyramid_entries")


check_pyramid = Exercise(
    "ex-matching-pyramid", kind="Derive", points=2,
    answers=("my_pyramid_entries",), run=_pyramid_run,
    seed=92,
    written="show that the whole pyramid holds less than 4/3 of its finest "
            "level, and say what that means for RAFT's memory",
    written_points=1,
    success="H·W · Σₖ ⌊H/2ᵏ⌋·⌊W/2ᵏ⌋: every pixel of frame 1 keeps a "
            "shrinking slice of frame 2 at each level.",
    doc="Exercise 10.2: entries of a correlation pyramid of (H, W, levels).")


# ------------------------------------------------------------------ 10.3
def _bilinear_run(my_bilinear_lookup, C, flow, radius):
    return call(my_bilinear_lookup, C, flow, radius,
                what="my_bilinear_lookup")


check_bilinear_lookup = Exercise(
    "ex-matching-bilinear", kind="Implement", points=3,
    answers=("my_bilinear_lookup",),
    run=_bilinear_run, seed=93,
    success="whole-pixel flows read exactly the chapter's lookup; between "
            "pixels the four neighbours are mixed by their closeness.",
    doc="Exercise 10.3: the lookup at real-valued flow, bilinear.")


# ------------------------------------------------------------------ 10.4
def _context_run(my_match_rates, seed, noise, beta):
    first = call(my_match_rates, seed, noise, beta, what="my_match_rates")
    return first, call(my_match_rates, seed, noise, beta,
                       what="my_match_rates")


check_context = Exercise(
    # Numbers a student could make up: the points go to the written
    # part, which the instructor reads.
    "ex-matching-context", kind="Experiment", points=0,
    answers=("my_match_rates",), run=_context_run,
    seed=94,
    written="why does β = 0 fail where β = 8 succeeds, and what must the "
            "context of a patch be anchored to?",
    written_points=4,
    success="appearance alone stays near chance, a sharp question to the "
            "landmark disambiguates, and a uniform one does not.",
    doc="Exercise 10.4: match rates with and without a context step.")


# ------------------------------------------------------------------ 10.5
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
    written_points=1,
    success="the measured matches are right; now set the fraction that "
            "lands on the nearest whole-patch shift beside your prediction.",
    doc="Exercise 10.5: where patches land when the motion is not a whole "
        "number of patches.")
