"""Views that redraw only while shown: a view in a tab that is not the current one
notes that it is out of date and redraws when its tab comes to the front, so unseen
plots cost the GUI thread nothing.

A widget in a tabbed-away dock still reports isVisible(); what tells is an empty
visible region, and the dock's visibilityChanged signal when it comes back.
"""

from __future__ import annotations

from .view import ViewHooks


class LazyRefresh(ViewHooks):
    """Mixin for QWidget views: call ``self.request_refresh()`` on every change, put the
    drawing in ``self.redraw()``, and connect the dock's ``visibilityChanged`` to
    ``self.visibility_changed``."""

    _stale = True

    def shown(self) -> bool:
        return self.isVisible() and not self.visibleRegion().isEmpty()

    def request_refresh(self, *_args) -> None:
        if self.shown():
            self._stale = False
            self.redraw()
        else:
            self._stale = True

    def visibility_changed(self, visible: bool) -> None:
        if visible and self._stale:
            self._stale = False
            self.redraw()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().showEvent(event)
        if self._stale and self.shown():
            self._stale = False
            self.redraw()

    def redraw(self) -> None:
        raise NotImplementedError
