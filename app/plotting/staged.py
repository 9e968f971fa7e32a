"""Widgets built a piece at a time: an export builds a replica of the plots between the
window's frames, each piece a few ms, so the GUI thread keeps painting and answering."""

from __future__ import annotations

from collections.abc import Iterator


class Staged:
    """A construction given as a generator, one piece per step: run to its end at once, or
    left to the caller (`staged`), who runs `build_steps()` a step per turn of the loop."""

    def _build(self, steps: Iterator[None], staged: bool) -> None:
        self._steps = steps
        if not staged:
            for _ in steps:
                pass

    def build_steps(self) -> Iterator[None]:
        """The rest of a staged construction, one piece per step."""
        return self._steps
