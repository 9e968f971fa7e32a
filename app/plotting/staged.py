"""Widgets built a piece at a time: an export builds a replica of the plots between the
window's frames, each piece a few ms, so the GUI thread keeps painting and answering."""

from __future__ import annotations

from collections.abc import Iterator


class StagedBuild:
    """A construction given as a generator, one piece per step: run to its end at once, or
    left to the caller (`staged`), who runs `steps` a step per turn of the loop (the widget
    that owns it hands them out as `build_steps()`)."""

    def __init__(self, steps: Iterator[None], staged: bool) -> None:
        #: The rest of the construction, one piece per step.
        self.steps = steps
        if not staged:
            for _ in steps:
                pass
