"""One step of the guided lesson, and the views a step can point at: shared by the prefill's
steps (app/state/lesson.py) and the decode pass's (app/state/decode_lesson.py)."""

from __future__ import annotations

from dataclasses import dataclass

#: The views a step points at (objectNames the window knows).
MEMORY, ROOFLINE, TILES = "memoryPlot", "rooflinePlot", "tileAnimation"


@dataclass(frozen=True)
class LessonStep:
    title: str
    text: str
    focus: str  # the objectName of the view the step is about
    #: The N the step describes: the lesson moves the slider there (None: where it is).
    seq_len: int | None = None
