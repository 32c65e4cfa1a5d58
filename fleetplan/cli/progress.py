"""Progress bars: the library reports ``progress(stage, done, total)``; the CLI draws rich bars.

Bars are shown only when stderr is a terminal, so pipes, files and CI logs stay clean;
``--quiet`` (``fleetplan.cli.options.quiet_option``) turns them off on a terminal too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

_LABELS = {
    "sweep": "analytical sweep",
    "verify": "simulating candidates",
    "profile": "simulating the recommendation",
    "headroom": "headroom of the recommendation",
    "whatif": "what-if rates",
    "threshold": "step thresholds",
    "grid-flex": "grid-flex levels",
    "frontier": "frontier runs",
}


@contextlib.contextmanager
def progress_reporter(quiet: bool = False) -> Iterator:
    """Yields a ``progress(stage, done, total)`` callback (None when quiet or not on a terminal)."""
    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        yield None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_LABELS.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield update
