"""The one style of terminal table, made to fit an 80-column terminal without cutting a cell.

Every table a command prints is :func:`table`: a rule under the header and no borders (rich's
``SIMPLE_HEAD``, no edge padding), columns two spaces apart. What goes in a column:

- identifiers a user copies (task ids, snapshot names, unit keys): :func:`ident_column`, at
  their full width (the text columns wrap to make room);
- numbers: short, right-aligned, ``no_wrap`` (``add_column(..., justify="right",
  no_wrap=True)``);
- free text (a title, a source): wraps between words (rich's default);
- paths: :func:`short_path` (``~`` for the home folder) in a folding column, or, when a column
  of paths shares one folder, the folder once under the table (:func:`common_folder`).

Full values belong in files (CSV, report.md, the pins file); a table shows what a reader scans.
rich is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path


def table(*, padding=(0, 1), collapse_padding: bool = True, **kw):
    """A borderless table with a rule under its header (rich ``Table``); ``kw`` go to it.

    Columns are two spaces apart (one of padding, collapsed, plus the box's blank divider)."""
    from rich import box
    from rich.table import Table

    return Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        padding=padding,
        collapse_padding=collapse_padding,
        **kw,
    )


def ident_column(tab, header: str, **kw) -> None:
    """Add a left-aligned column of identifiers: ``no_wrap``, so the table narrows the text
    columns first and an identifier is never split at 80 columns (only a terminal too narrow
    for the identifiers alone would cut it)."""
    kw.setdefault("no_wrap", True)
    tab.add_column(header, **kw)


def fit(tab, width: int, elastic: Sequence[str], least: int = 10) -> None:
    """Let the ``elastic`` columns (by header; free text or paths) fold so the table fits
    ``width`` terminal columns. When the cells' natural widths do not fit, the elastic columns
    share what the other columns leave: the last listed keeps its natural width first, the
    first listed gives way first, none narrower than ``least``; a capped column folds (wraps
    mid-word, a path or an identifier included). Call after the rows are added.

    rich alone would not: it never narrows a column below its longest word (a path is one word)
    and then cuts every column with an ellipsis."""
    from rich.cells import cell_len
    from rich.text import Text

    def natural(col) -> int:
        texts = [t for t in (col.header, *col.cells) if isinstance(t, str)]
        return max(
            (cell_len(line) for t in texts for line in Text.from_markup(t).plain.splitlines()),
            default=0,
        )

    by_name = {str(c.header).replace("\n", " "): c for c in tab.columns}
    cols = [by_name[n] for n in elastic if n in by_name]
    elastic_ids = {id(c) for c in cols}  # identity: rich's Column compares by value
    widths = [natural(c) for c in tab.columns]
    gaps = 2 * (len(tab.columns) - 1)  # the spacing of table()'s default padding
    if not cols or sum(widths) + gaps <= width:
        return
    budget = (
        width
        - gaps
        - sum(w for c, w in zip(tab.columns, widths, strict=True) if id(c) not in elastic_ids)
    )
    natural_of = {id(c): w for c, w in zip(tab.columns, widths, strict=True)}
    for i in range(len(cols) - 1, -1, -1):
        col = cols[i]
        w = max(least, min(natural_of[id(col)], budget - least * i))
        col.max_width, col.overflow, col.no_wrap = w, "fold", False
        budget -= w


def short_path(path: str | os.PathLike) -> str:
    """``path`` with the home folder written ``~`` (``/root/.cache/x`` -> ``~/.cache/x``)."""
    text = str(path)
    home = str(Path.home())
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home) :]
    return text


def common_folder(paths: Iterable[str | os.PathLike]) -> Path | None:
    """The folder every path in ``paths`` sits in directly, or ``None`` (none, or several)."""
    parents = {Path(p).parent for p in paths}
    return parents.pop() if len(parents) == 1 else None
