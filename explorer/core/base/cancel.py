"""Stopping long work cooperatively: the worker asks ``should_stop()`` at safe points
and raises ``Cancelled``, leaving nothing half-done behind."""

from __future__ import annotations

from typing import Callable


class Cancelled(Exception):
    """Work stopped at the user's request."""


def check(should_stop: Callable[[], bool] | None) -> None:
    if should_stop is not None and should_stop():
        raise Cancelled("stopped")
