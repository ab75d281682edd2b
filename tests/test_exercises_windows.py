"""Chapter 8's exercise checks accept right answers, explain wrong ones."""

import numpy as np
import pytest

from exercise_answers import own
from selfattention import position
from selfattention import windows as lib
from selfattention.exercises import windows as checks


_index = own(position.relative_position_index)


class wn:                       # copies of the library's functions
    window_partition = staticmethod(own(lib.window_partition))
    relative_position_index = staticmethod(lambda M: _index((M, M)))



def run(check, answer, label):
    fb = check.feedback(answer)
    assert fb.exercise == label
    return fb


def strips(x, M):
    return x.reshape(-1, M * M, x.shape[-1])


def cols_first(x, M):
    H, W, C = x.shape
    w = wn.window_partition(x, M).reshape(H // M, W // M, M * M, C)
    return w.transpose(1, 0, 2, 3).reshape(-1, M * M, C)


def inner_transposed(x, M):
    w = wn.window_partition(x, M)
    return w.reshape(-1, M, M, x.shape[-1]).transpose(0, 2, 1, 3).reshape(
        w.shape)


def shuffled_inside(x, M):
    return wn.window_partition(x, M)[:, ::-1]


def wrong_blocks(x, M):
    return wn.window_partition(np.roll(x, 1, axis=0), M)


@pytest.mark.parametrize("answer, status, words", [
    (wn.window_partition, "correct", ["row-major"]),
    (None, "not done", ["empty"]),
    (lambda x, M: None, "not done", ["returned None"]),
    (lambda x, M: x, "wrong", ["shape"]),
    (strips, "wrong", ["strip", "swap"]),
    (cols_first, "wrong", ["column by column"]),
    (inner_transposed, "wrong", ["column-major order"]),
    (shuffled_inside, "wrong", ["not in row-major order"]),
    (wrong_blocks, "wrong", ["outside"]),
    (lambda x, M: x[10], "wrong", ["IndexError"]),
    (lib.window_partition, "for review", ["window_partition"]),
])
def test_partition_check(answer, status, words):
    fb = run(checks.check_window_partition, answer, "ex-windows-partition")
    assert fb.status == status
    assert fb.points == (1.0 if status == "correct" else 0.0)
    for word in words:
        assert word in fb.message


def right_counts(H, W, M):
    return (H // M) * (W // M), (H // M + 1) * (W // M + 1)


@pytest.mark.parametrize("answer, status, words", [
    (right_counts, "correct", ["(H/M + 1)"]),
    (None, "not done", ["empty"]),
    (lambda H, W, M: right_counts(H, W, M)[::-1], "wrong", ["swapped"]),
    (lambda H, W, M: (H * W // M, 0), "wrong", ["M²"]),
    (lambda H, W, M: ((H // M) * (W // M), (H // M + 2) * (W // M + 2)),
     "wrong", ["each side"]),
    (lambda H, W, M: ((H // M) * (W // M), (H // M + 1) ** 2), "wrong",
     ["not square"]),
    (lambda H, W, M: ((H // M) * (W // M), (H // M) * (W // M) + 1),
     "wrong", ["each axis gains one window"]),
    (lambda H, W, M: ((H // M) * (W // M), 5), "wrong", ["padding gives"]),
    (lambda H, W, M: 64, "wrong", ["pair"]),
])
def test_count_check(answer, status, words):
    fb = run(checks.check_window_counts, answer, "ex-windows-count")
    assert fb.status == status
    for word in words:
        assert word in fb.message


@pytest.mark.parametrize("answer, status, words", [
    (lambda h, w, M: h * w / M ** 2, "correct", ["64"]),
    (lambda h, w, M: (h * w) // (M * M), "correct", []),
    (None, "not done", ["empty"]),
    (lambda h, w, M: M ** 2 / (h * w), "wrong", ["upside down"]),
    (lambda h, w, M: h * w / M, "wrong", ["M²"]),
    (lambda h, w, M: (h * w) ** 2 / M ** 2, "wrong", ["(hw)²"]),
    (lambda h, w, M: 3.0, "wrong", ["expected 64"]),
    (lambda h, w, M: "64", "wrong", ["number"]),
    (lambda h, w, M: [64], "wrong", ["number"]),
])
def test_ratio_check(answer, status, words):
    fb = run(checks.check_score_ratio, answer, "ex-windows-ratio")
    assert fb.status == status
    for word in words:
        assert word in fb.message


def offsets(M):
    r, c = np.divmod(np.arange(M * M), M)
    return (r[:, None] - r[None, :] + M - 1, c[:, None] - c[None, :] + M - 1)


@pytest.mark.parametrize("answer, status, words", [
    (wn.relative_position_index, "correct", ["(2M-1)²"]),
    (None, "not done", ["empty"]),
    (lambda M: np.zeros((M, M), int), "wrong", ["shape"]),
    (lambda M: wn.relative_position_index(M) - (M - 1), "wrong",
     ["negative"]),
    (lambda M: wn.relative_position_index(M).T, "wrong", ["key minus query"]),
    (lambda M: offsets(M)[0] * M + offsets(M)[1], "wrong", ["2M - 1"]),
    (lambda M: offsets(M)[1] * (2 * M - 1) + offsets(M)[0], "wrong",
     ["swapped"]),
    (lambda M: wn.relative_position_index(M) // 2, "wrong", ["differs"]),
    (lambda M: position.relative_position_index((M, M)), "for review",
     ["relative_position_index"]),
])
def test_index_check(answer, status, words):
    fb = run(checks.check_relative_index, answer, "ex-windows-index")
    assert fb.status == status
    for word in words:
        assert word in fb.message


def test_checks_never_raise_on_garbage(capsys):
    for check in (checks.check_window_partition, checks.check_window_counts,
                  checks.check_score_ratio, checks.check_relative_index):
        check(lambda *a: "nonsense")
        check(42)
    out = capsys.readouterr().out
    assert out.count("Not yet") == 8
