"""The tables `vecmem search` and `vecmem list` print (rich, imported only when a table is printed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from vecmem.config import Settings
from vecmem.retrieval.rank import TIE_BAND

if TYPE_CHECKING:
    from vecmem.models import Hit, MemoryRecord

__all__ = ["print_hits", "print_records"]


def _console(out: TextIO) -> Any:
    from rich.console import Console

    # Wide enough for the content column when the output is a file or a pipe rather than a terminal.
    return Console(file=out, width=None if out.isatty() else 160, highlight=False)


def print_hits(out: TextIO, hits: Sequence[Hit], settings: Settings) -> None:
    """Ranked hits with every part of their score, and a caption saying how the parts combine."""
    from rich.table import Table

    w = settings.weights
    gate = f"max(1 - similarity, {TIE_BAND:g})·" if w.gated else ""
    caption = (f"score = {w.similarity:g}·similarity + {gate}({w.recency:g}·recency + "
               f"{w.importance:g}·importance)")
    if settings.search_mode == "hybrid":
        dense = settings.dense_weight
        caption += f"; similarity = {dense:g}·dense + {1 - dense:g}·keyword, each side scaled per query"
    table = Table(caption=caption, show_lines=False)
    for column in ("#", "score", "similarity", "dense", "keyword", "recency", "importance", "type", "scope",
                   "content", "id"):
        table.add_column(column, overflow="fold", justify="right" if column in ("#", "score") else "left")
    for rank, hit in enumerate(hits, start=1):
        table.add_row(
            str(rank),
            f"{hit.score:.4f}",
            f"{hit.similarity:.4f}",
            "-" if hit.dense is None else f"{hit.dense:.4f}",
            "-" if hit.keyword is None else f"{hit.keyword:.4f}",
            f"{hit.recency:.4f}",
            f"{hit.importance:.4f}",
            hit.type,
            hit.record.scope,
            hit.content,
            hit.id,
        )
    if not hits:
        print("no memories found", file=out)
        return
    _console(out).print(table)


def print_records(out: TextIO, records: Sequence[MemoryRecord]) -> None:
    """Memories as a table, one row each."""
    from rich.table import Table

    if not records:
        print("no memories", file=out)
        return
    table = Table()
    for column in ("id", "type", "importance", "scope", "content", "tags", "superseded by"):
        table.add_column(column, overflow="fold")
    for record in records:
        table.add_row(
            record.id,
            record.type,
            f"{record.importance:.2f}",
            record.scope,
            record.content,
            ", ".join(record.tags),
            record.superseded_by or "",
        )
    _console(out).print(table)
