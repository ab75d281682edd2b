"""Tables that the chapters show: an HTML table in the book and in Jupyter,
aligned plain text everywhere else.

A chapter builds one from its numbers and lets Jupyter display it (the last
line of a cell, or ``display(table)``). The book then shows a real table,
which a narrow screen scrolls as a whole instead of wrapping its rows; the
plain text (``repr``) is the same table set in columns, which a terminal,
a plain notebook viewer and nbval (it compares both forms) read. Every
cell is formatted once, by the chapter's own format, so the two forms
always show the same digits.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

__all__ = ["Table"]


def _formatter(fmt) -> Callable[[object], str]:
    if callable(fmt):
        return fmt
    if isinstance(fmt, str):
        return fmt.format
    raise TypeError(f"fmt must be a format string such as '{{:.2f}}' or a "
                    f"callable, got {type(fmt).__name__}")


class Table:
    """A table of ``rows`` (a sequence of rows, each a sequence of values)
    with a header of ``columns`` and, optionally, a label per row
    (``index``, shown as the first column).

    ``fmt`` formats every value (a format string such as ``"{:.2f}"`` or a
    function of the value; default ``str``); ``fmts`` may give one per
    column instead. ``title`` is the table's caption; ``corner`` the header
    above the row labels.
    """

    def __init__(self, rows, columns: Sequence[str],
                 index: Sequence[str] | None = None, *, fmt="{}",
                 fmts: Sequence | None = None, title: str = "",
                 corner: str = ""):
        rows = [list(r) for r in rows]
        columns = [str(c) for c in columns]
        if not columns:
            raise ValueError("columns must name at least one column")
        for k, row in enumerate(rows):
            if len(row) != len(columns):
                raise ValueError(f"row {k} has {len(row)} values, but there "
                                 f"are {len(columns)} columns")
        if index is not None and len(index) != len(rows):
            raise ValueError(f"index has {len(index)} labels for "
                             f"{len(rows)} rows")
        if fmts is not None and len(fmts) != len(columns):
            raise ValueError(f"fmts has {len(fmts)} formats for "
                             f"{len(columns)} columns")
        formats = [_formatter(f) for f in (fmts or [fmt] * len(columns))]
        self.title = str(title)
        self.columns = columns
        self.index = None if index is None else [str(i) for i in index]
        self.corner = str(corner)
        #: every value as it is shown, row by row
        self.cells = [[f(v) for f, v in zip(formats, row)] for row in rows]

    def _text_rows(self) -> list[list[str]]:
        header = ([self.corner] if self.index is not None else []) \
            + self.columns
        body = [([self.index[k]] if self.index is not None else []) + row
                for k, row in enumerate(self.cells)]
        return [header] + body

    def __repr__(self) -> str:
        table = self._text_rows()
        widths = [max(len(r[j]) for r in table) for j in range(len(table[0]))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)).rstrip()
                 for r in table]
        return "\n".join(([self.title] if self.title else []) + lines)

    def _repr_html_(self) -> str:
        e = html.escape
        out = ['<table class="sa-table">']
        if self.title:
            out.append(f"<caption>{e(self.title)}</caption>")
        head = "".join(f'<th scope="col">{e(c)}</th>' for c in self.columns)
        if self.index is not None:
            head = f'<th scope="col">{e(self.corner)}</th>' + head
        out.append(f"<thead><tr>{head}</tr></thead><tbody>")
        for k, row in enumerate(self.cells):
            label = ("" if self.index is None
                     else f'<th scope="row">{e(self.index[k])}</th>')
            out.append("<tr>" + label
                       + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>")
        out.append("</tbody></table>")
        return "".join(out)
