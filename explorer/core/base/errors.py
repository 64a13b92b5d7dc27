"""The error every checkpoint reader raises: a file and what is wrong with it."""

from __future__ import annotations

import os


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file and the problem."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = str(path)
        while problem.startswith(f"{path}: "):  # a check's own error, passed on: one name
            problem = problem[len(f"{path}: "):]
        self.problem = problem
        super().__init__(f"{path}: {problem}")
