"""The parts of a block family's record that describe its model rather than its graph
(``family.BlockFamily`` holds one of each): how the model is made, the classes its forward
is written in, its own words, the files it is read from, how its parameters are counted.
Nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .node_types import Kind
from .norm_position import NormPosition
from .variant import Variant

if TYPE_CHECKING:
    from .counts import ParameterCounts, Row


@dataclass(frozen=True)
class ModelCode:
    """How a family's model is made: ``new(cfg)`` the module (its parameters as the
    current device makes them), ``initialise(model, seed, should_stop)`` its seeded
    weights, ``classes()`` the classes the Code view shows (``Classes``), and where the
    classes it shares with another family compute otherwise (``variant``). The functions
    import the model's module when called, so the record itself needs no torch."""

    new: Callable[[Any], Any]
    initialise: Callable[..., Any]
    classes: Callable[[], "Classes"]
    variant: Variant = Variant()


@dataclass(frozen=True)
class Classes:
    """The classes a family's forward is written in, and the methods the Code view reads:
    the block's forward per norm position; the attention's steps (``attention_forward``;
    the scores, mask and pattern in ``attention_scored`` where that is another method)."""

    model: type
    block: type
    attention: type
    feed_forward: type
    block_forwards: dict[NormPosition, str]
    attention_forward: str = "forward"
    attention_scored: str | None = None


@dataclass(frozen=True)
class Words:
    """A family's own words: its kinds' texts where they differ from the kind's record
    (``what`` and ``mistake`` by kind, with the {names} of lessons/explain.numbers), the
    ways it does each job of a block (``ways``: job -> cfg -> words, for the comparison
    of two blocks), the feed-forward's formula, the Code view's notes (part -> words),
    why an experiment of another family does not apply to it, its name for a config,
    and what the one-line size says after the count."""

    what: dict[Kind, str] = field(default_factory=dict)
    mistake: dict[Kind, str] = field(default_factory=dict)
    ways: dict[str, Callable[[Any], str]] = field(default_factory=dict)
    feed_forward: str = ""
    code_notes: dict[str, str] = field(default_factory=dict)
    lacks: Callable[[str], str] = lambda mutation: "it"
    name: Callable[[Any], str] | None = None  # "Qwen3" for a config with q/k norms …
    size_note: Callable[[Any], str] = lambda cfg: ""  # after the size line's count


@dataclass(frozen=True)
class Files:
    """How a family's models are stored: config.json's ``model_type`` values it opens
    (Hugging Face), the module of the weights layer that maps each format's names onto
    the family's (``FORMATS`` there: Hugging Face's, the book's ``.pth``), and whether a
    model folder brings its own tokenizer (GPT-2's is the bundled vocabulary)."""

    model_types: tuple[str, ...]
    key_maps: str  # a module path, imported by weights/state_dicts.py
    own_tokenizer: bool
    hf_name: Callable[[str | None], str] = lambda model_type: "model"  # "Qwen3" for "qwen3"
    hf_keys: tuple[str, ...] = ()  # what its config.json always holds ("n_head")


@dataclass(frozen=True)
class Counting:
    """The parameters of a config, counted per component without building a model
    (``count``), the rows the size table shows (``rows``), and what the feed-forward
    costs at another width: its matrices, and whether its Linears have biases."""

    count: Callable[[Any], "ParameterCounts"]
    rows: Callable[[Any, "ParameterCounts"], tuple["Row", ...]]
    ff_matrices: int
    ff_biases: bool
