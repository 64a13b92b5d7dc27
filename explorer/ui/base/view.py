"""What a view is to the window: built as ``View(session, engine)`` and listed once in
``ui/views/registry.py``; whoever builds it sets its ``services`` (what it may ask of the
window: ui/base/services.py); the window calls these hooks on every view, and a view
overrides the ones it needs (``LazyRefresh`` overrides ``visibility_changed``)."""

from __future__ import annotations

from .services import Services


class ViewHooks:
    """Mixin before QWidget: ``class MyView(ViewHooks, QWidget)``."""

    # what the view may ask of the window; none provided until whoever builds it sets its
    # own (the main window, a view alone, a test)
    services: Services = Services()

    def save_settings(self, settings) -> None:
        """Keep the view's own settings (QSettings) when the window closes."""

    def restore_settings(self, settings) -> None:
        """Take them back when the window opens."""

    def shutdown(self, wait_s: float) -> bool:
        """The window closes: stop the view's own threads (training's), waiting at most
        ``wait_s`` seconds; False when one is still in its job then."""
        return True

    def visibility_changed(self, visible: bool) -> None:
        """Its dock was shown (True) or tabbed away or closed (False)."""
