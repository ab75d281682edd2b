"""Chapter 10's checks accept right answers and name typical mistakes."""

import numpy as np
import pytest

from selfattention.attention import softmax
from selfattention.exercises import matching as checks
from exercise_answers import own
from selfattention import matching as lib

correlation_volume = own(lib.correlation_volume)
displacements = own(lib.displacements)



def disp(A, grid):
    rows, cols = grid
    n = rows * cols
    best = np.argmax(A, axis=1)
    return np.stack(np.divmod(best, cols), 1) \
        - np.stack(np.divmod(np.arange(n), cols), 1)


@pytest.mark.parametrize("answer, status, words", [
    (disp, "correct", []),
    (lambda A, g: displacements(A, g, periodic=False), "correct", []),
    (lambda A, g: disp(A, g)[:, ::-1], "wrong", ["(d_col, d_row)"]),
    (lambda A, g: -disp(A, g), "wrong", ["signs"]),
    (lambda A, g: np.stack(np.divmod(np.argmax(A, 1), g[1]), 1), "wrong",
     ["positions of the best keys"]),
    (lambda A, g: disp(A.T, g), "wrong", ["axis 1"]),
    (lambda A, g: np.argmax(A, 1), "wrong", ["shape"]),
    (lambda A, g: disp(A, g) + (np.arange(len(A))[:, None] == 0), "wrong",
     ["some displacements"]),
    (None, "not done", []),
    (lambda A, g: lib.displacements(A, g, periodic=False), "for review",
     ["displacements"]),
])
def test_displacement_check(answer, status, words):
    fb = checks.check_displacements.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


def flat_softmax(F1, F2):
    H, W = F1.shape[:2]
    S = correlation_volume(F1, F2).reshape(H * W, H * W)
    return softmax(S).reshape(H, W, H, W)


@pytest.mark.parametrize("answer, status, words", [
    (lambda F1, F2: np.einsum("ijd,kld->ijkl", F1, F2), "correct", []),
    (correlation_volume, "correct", []),
    (lambda F1, F2: correlation_volume(F1, F2).reshape(12, 12), "wrong",
     ["reshape"]),
    (lambda F1, F2: correlation_volume(F1, F2) / np.sqrt(F1.shape[-1]),
     "wrong", ["√D"]),
    (flat_softmax, "wrong", ["softmax"]),
    (lambda F1, F2: correlation_volume(F2, F1), "wrong", ["swapped"]),
    (lambda F1, F2: correlation_volume(F1, F2) + 1, "wrong", ["einsum"]),
    (lambda F1, F2: F1, "wrong", ["shape"]),
    (None, "not done", []),
    (lib.correlation_volume, "for review", ["correlation_volume"]),
])
def test_correlation_check(answer, status, words):
    fb = checks.check_correlation.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


@pytest.mark.parametrize("answer, status, words", [
    (9_437_184, "correct", []),
    (3072 ** 2, "correct", []),
    (3072, "wrong", ["one frame"]),
    ((384 * 512) ** 2, "wrong", ["full resolution"]),
    ((384 * 512 // 8) ** 2, "wrong", ["by 64"]),
    (12345, "wrong", ["pair each"]),
    ("many", "wrong", ["number"]),
    (None, "not done", []),
])
def test_count_check(answer, status, words):
    fb = checks.check_count.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message
