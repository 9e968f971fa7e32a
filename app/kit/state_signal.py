"""The Qt side of the app state: a QObject whose one signal carries every state Change.

Qt views connect to `StateSignal.changed` instead of subscribing to the StateModel directly:
Qt then drops the connection when the view is deleted, and a view may ask for a queued
connection. Writes go to `update`, which is the model's.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from ..state.app_state import AppState, StateModel


class StateSignal(QObject):
    """Re-emits each StateModel change, once, as `changed(Change)`."""

    changed = Signal(object)

    def __init__(self, model: StateModel | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.model = model if model is not None else StateModel()
        self._unsubscribe = self.model.subscribe(self.changed.emit)

    @property
    def value(self) -> AppState:
        return self.model.value

    def update(self, **changes: object) -> None:
        self.model.update(**changes)

    def detach(self) -> None:
        """Stop relaying (the window is closing)."""
        self._unsubscribe()
