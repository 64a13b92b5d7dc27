"""What a view is to the window: built as ``View(session, engine)`` and listed once in
``ui/views/registry.py``; the window calls these hooks on every view, and a view
overrides the ones it needs (``LazyRefresh`` overrides ``visibility_changed``)."""

from __future__ import annotations


class ViewHooks:
    """Mixin before QWidget: ``class MyView(ViewHooks, QWidget)``."""

    def save_settings(self, settings) -> None:
        """Keep the view's own settings (QSettings) when the window closes."""

    def restore_settings(self, settings) -> None:
        """Take them back when the window opens."""

    def visibility_changed(self, visible: bool) -> None:
        """Its dock was shown (True) or tabbed away or closed (False)."""
