"""selfattention.tables: the same digits in the HTML table and in its text."""

import html
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selfattention.tables import Table


def html_cells(table: Table) -> list[list[str]]:
    """The text of every body cell of the HTML form, row by row, labels
    first."""
    body = table._repr_html_().split("<tbody>", 1)[1]
    return [[html.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>",
                                                   row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body)]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_html_and_text_show_the_same_cells(n_rows, n_cols, seed):
    values = np.random.default_rng(seed).normal(size=(n_rows, n_cols)) * 100
    names = [f"c<{j}>" for j in range(n_cols)]
    index = [f"r&{i}" for i in range(n_rows)]
    table = Table(values, names, index, fmt="{:.2f}", title="t")
    want = [[index[i]] + [f"{v:.2f}" for v in values[i]]
            for i in range(n_rows)]
    assert html_cells(table) == want
    lines = repr(table).splitlines()
    assert lines[0] == "t" and len(lines) == n_rows + 2
    for line, row in zip(lines[2:], want):
        assert line.split() == row          # same cells, columns aligned
    ends = {len(line) for line in lines[1:]}
    assert len(ends) == 1                   # right-aligned: one width


def test_each_column_keeps_its_own_format():
    table = Table([[1, 0.5], [22, 0.25]], ["k", "share"],
                  fmts=["{:d}", "{:.0%}"])
    assert html_cells(table) == [["1", "50%"], ["22", "25%"]]
    assert repr(table).splitlines() == [" k  share", " 1    50%",
                                        "22    25%"]


def test_markup_in_names_is_text_not_html():
    table = Table([[1]], ["<b>x</b>"], title="<script>")
    shown = table._repr_html_()
    assert "<b>" not in shown and "<script>" not in shown


@pytest.mark.parametrize("bad", [
    dict(rows=[[1, 2]], columns=["a"]),                  # row too long
    dict(rows=[[1]], columns=["a"], index=["x", "y"]),   # index too long
    dict(rows=[[1]], columns=[]),
    dict(rows=[[1]], columns=["a"], fmts=["{}", "{}"]),
    dict(rows=[[1]], columns=["a"], fmt=3),
])
def test_mismatched_shapes_are_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        Table(**bad)
