"""Views made over several loop turns: what is in sight first, then the parts out of
sight (the tabs behind the first one, a page of its own), so that no turn of the
window's event loop builds a whole view of many plots at once (a key pressed meanwhile
would wait for all of it).

A view lists in ``LATER`` the attributes its later parts set and makes them in
``build_later``: a plain method, made in one turn, or a generator, one turn for each
``yield``. ``later_soon()`` at the end of its ``__init__`` asks for them a turn later.
Whoever reads one of them first, the view itself included, has the rest made at once, so
nothing ever finds them missing. A step must not read a part that a later step makes,
and a part is set when it is whole: made in steps, it is kept apart (in the generator's
own variables) until the step that finishes it.
"""

from __future__ import annotations

import inspect

from PySide6.QtCore import QTimer


class BuiltLater:
    """Mixin for QWidget views (see the module's docstring)."""

    LATER: tuple[str, ...] = ()

    def build_later(self):
        raise NotImplementedError

    def later_soon(self) -> None:
        """Make the later parts from the next loop turn on (dropped if the view is gone)."""
        QTimer.singleShot(0, self, self._later_step)

    def built(self) -> bool:
        """Whether the later parts are all made."""
        return self.__dict__.get("_later_built", False)

    def build_now(self) -> None:
        """Make the later parts still to make, now."""
        if not self.built():
            for _ in self._later_steps():
                pass
            self._later_built = True

    def _later_steps(self):
        steps = self.__dict__.get("_later_iter")
        if steps is None:
            self._later_iter = steps = iter(())  # set first: build_later may read a part
            made = self.build_later()
            if inspect.isgenerator(made):
                self._later_iter = steps = made
        return steps

    def _later_step(self) -> None:
        if self.built():
            return
        try:
            next(self._later_steps())
        except StopIteration:
            self._later_built = True
            return
        QTimer.singleShot(0, self, self._later_step)

    def __getattr__(self, name: str):
        # only called for an attribute not set: one of the later parts, still to make
        if name in type(self).LATER and not self.__dict__.get("_later_built", False):
            self.build_now()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
