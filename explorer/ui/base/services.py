"""What a view asks of whoever assembled it: load a model, run a prompt, branch, show
another view, explain a token, generate with other settings, train a model here. Each is
one typed call with one provider (the main window, a view alone, a test), set on
``Services`` when the view is built (``ViewHooks.services``).

The session holds state and schedules redraws; it carries no commands. A view calls
``self.services.load_model(spec, then=...)``; ``then`` gets the loaded model's ModelInfo,
so that "load this snapshot, then run the prompt on it" is one call, not a chain of
signals through the window."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable


def _nobody(what: str) -> Callable[..., None]:
    def unavailable(*_args: Any, **_kwargs: Any) -> None:
        return None  # nothing here provides it (a view alone, a test): nothing happens
    unavailable.__doc__ = f"Nothing provides '{what}' here."
    return unavailable


@dataclass
class Services:
    """The calls a view may make; each does nothing until its provider sets it."""

    # (spec: ModelSpec, then: Callable[[ModelInfo], None] | None = None): load it in the
    # engine; on failure or Stop the previous model stays and ``then`` is not called
    load_model: Callable[..., None] = _nobody("load a model")
    # (prompt: str = ""): run it as Ctrl+Enter does ("" the prompt panel's own text)
    run_prompt: Callable[..., None] = _nobody("run the prompt")
    # (token_id: int): continue from the shown step with this token instead
    branch: Callable[[int], None] = _nobody("branch")
    # (key: str): show that view, in its workspace, in front
    show_view: Callable[[str], None] = _nobody("show a view")
    # (token_id: int): why this token at the shown pass's position (the Why view answers)
    explain_token: Callable[[int], None] = _nobody("explain a token")
    # (settings: GenerationSettings): the next generation uses them
    use_sampling: Callable[[Any], None] = _nobody("use sampling settings")
    # (): train the default small model here (Experiment ▸ Train), shown
    train_here: Callable[[], None] = _nobody("train a model here")

    def provide(self, **calls: Callable[..., Any]) -> "Services":
        """Set the providers given (a name that is no service is an error)."""
        names = {f.name for f in fields(self)}
        for name, call in calls.items():
            if name not in names:
                raise AttributeError(f"no service {name!r}; the services are {', '.join(sorted(names))}")
            setattr(self, name, call)
        return self
