"""Views that redraw only while visible: a hidden (tabbed-away) view notes that it is
out of date and redraws when shown, so unseen plots cost the GUI thread nothing."""

from __future__ import annotations


class LazyRefresh:
    """Mixin for QWidget views: call ``self.request_refresh()`` on every change and put
    the drawing in ``self.redraw()``."""

    _stale = True

    def request_refresh(self, *_args) -> None:
        if self.isVisible():
            self._stale = False
            self.redraw()
        else:
            self._stale = True

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().showEvent(event)
        if self._stale:
            self._stale = False
            self.redraw()

    def redraw(self) -> None:
        raise NotImplementedError
