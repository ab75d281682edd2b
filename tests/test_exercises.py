"""The exercise checks accept right answers and explain wrong ones."""

import json

import numpy as np
import pytest

from selfattention.attention import attention, softmax
from selfattention.exercises import definition, results
from selfattention.exercises.core import check, Wrong


def last(label):
    return results()[label]


def test_feedback_is_recorded_and_printed(capsys):
    definition.check_softmax(softmax)
    fb = last("ex-definition-softmax")
    assert fb.passed and fb.points == fb.max_points == 1.0
    assert "Correct" in capsys.readouterr().out


@pytest.mark.parametrize("answer, status, words", [
    (None, "not done", ["empty"]),
    (lambda S: None, "not done", ["returned None"]),
    (lambda S: np.exp(S) / np.exp(S).sum(-1, keepdims=True), "wrong",
     ["overflows", "maximum"]),
    (lambda S: np.exp(S) / np.exp(S).sum(-2, keepdims=True), "wrong",
     ["columns"]),
    (lambda S: S.T, "wrong", ["shape"]),
    (lambda S: 1 / 0, "wrong", ["ZeroDivisionError"]),
])
def test_softmax_check_names_the_problem(answer, status, words):
    definition.check_softmax(answer)
    fb = last("ex-definition-softmax")
    assert fb.status == status and fb.points == 0
    for word in words:
        assert word in fb.message


@pytest.mark.parametrize("answer, words", [
    (lambda Q, K, V: (softmax(Q @ K.T) @ V, softmax(Q @ K.T)), ["√d_k"]),
    (lambda Q, K, V: (softmax(Q @ K.T / 4) @ V, softmax(Q @ K.T / 4)), ["d_k"]),
    (lambda Q, K, V: attention(Q, K, V)[1], ["pair"]),
    (lambda Q, K, V: (attention(Q, K, V)[1] @ V[:, :1], attention(Q, K, V)[1]),
     ["Y has shape"]),
])
def test_attention_check_names_the_problem(answer, words):
    definition.check_attention(answer)
    fb = last("ex-definition-attention")
    assert fb.status == "wrong"
    for word in words:
        assert word in fb.message


def test_attention_check_accepts_the_library():
    definition.check_attention(attention)
    assert last("ex-definition-attention").passed


@pytest.mark.parametrize("answer, status", [
    ((5, 7), "correct"), ((4, 6), "wrong"), (47, "wrong"), (None, "not done"),
])
def test_cross_attention_check(answer, status):
    definition.check_cross_attention(answer)
    assert last("ex-definition-cross").status == status


def test_results_are_appended_to_the_file_the_grader_names(tmp_path, monkeypatch):
    out = tmp_path / "results.jsonl"
    monkeypatch.setenv("SELFATTENTION_RESULTS", str(out))

    @check("ex-test", points=2.0)
    def check_positive(x):
        if x <= 0:
            raise Wrong("x must be positive")

    check_positive(1)
    check_positive(-1)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["points"] for r in rows] == [2.0, 0.0]
    assert rows[1]["message"] == "x must be positive"


def test_a_check_never_raises_on_an_unreadable_answer():
    # np.asarray(float) of a string inside a check body must become feedback
    @check("ex-unreadable", points=1.0)
    def check_float(answer):
        return float(answer) and None

    check_float("not a number")
    fb = last("ex-unreadable")
    assert fb.status == "wrong" and "could not be checked" in fb.message
    assert "ValueError" in fb.message


def test_explorer_titles_are_escaped():
    from selfattention.interactive import patch_explorer

    A = np.full((4, 4), 0.25)
    html = patch_explorer(np.zeros((4, 4)), A, (2, 2), 2,
                          title="Q < K & <b>").data
    assert "Q &lt; K &amp; &lt;b&gt;" in html and "<b>" not in html
