"""What a widget leaves in a saved notebook: a static rendering of its last state.

Every widget's output carries, beside its widget view, a static rendering (an HTML table, an
SVG drawing, dflab's graph document) that nbviewer, GitHub and a JupyterLab reopened without the
widgets' state show instead: nbconvert skips a widget view whose state was not saved, and dflab's
JupyterLab extension draws the rendering where JupyterLab would say "model not found".

A display bundle is fixed when the output is made, and a widget may change after it is shown (a
live view fed by training threads, a stepper stepped by a later cell). So a widget shows itself
with a display id, and once its state has settled (no change for ``SETTLE_S``) it replaces that
output with a bundle of its current state (IPython's ``update_display``). A front-end draws a
live widget anew when its output is replaced, so this happens only after changes stop, and
never for a change made by a click in the widget itself (what it shows is then already there,
and a redraw would lose the user's pan and zoom).

Invariant: a widget never shown through ``_ipython_display_`` (a child of a box, a widget only
used from Python) sends nothing.
"""

from __future__ import annotations

import threading
import uuid

SETTLE_S = 1.0  # quiet time after the last change before the saved output is replaced


class SavedOutput:
    """Mixin for a widget with ``_repr_mimebundle_`` (see the module docstring). The widget
    calls ``_state_changed()`` after a change its saved output should show, and may call
    ``save_output()`` to replace it at once (when a loop ends)."""

    _display_id: str | None = None
    _settle_timer = None
    _saving = threading.Lock()
    _saved_parents: tuple = ()  # boxes showing this widget: their saved outputs show it too

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if self._display_id is None:
            self._display_id = uuid.uuid4().hex
        data, metadata = self._bundle()
        display(data, metadata=metadata, raw=True, display_id=self._display_id)

    def _bundle(self) -> tuple[dict, dict]:
        data = self._repr_mimebundle_()
        data, metadata = data if isinstance(data, tuple) else (data, {})
        return dict(data), dict(metadata or {})

    def _state_changed(self) -> None:
        """The state changed: replace the saved output once changes stop for SETTLE_S."""
        for parent in self._saved_parents:
            parent._state_changed()
        if self._display_id is None:
            return
        with self._saving:
            if self._settle_timer is not None:
                self._settle_timer.cancel()
            timer = threading.Timer(SETTLE_S, self._settled)
            timer.daemon = True  # a pending save must never keep the interpreter alive
            self._settle_timer = timer
            timer.start()

    def _settled(self) -> None:
        with self._saving:
            self._settle_timer = None
        self.save_output()

    def save_output(self) -> None:
        """Replace the widget's outputs with a rendering of its state now."""
        with self._saving:
            if self._settle_timer is not None:
                self._settle_timer.cancel()
                self._settle_timer = None
        if self._display_id is None:
            return
        from IPython.display import update_display

        data, metadata = self._bundle()
        update_display(data, metadata=metadata, raw=True, display_id=self._display_id)
