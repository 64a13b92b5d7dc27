"""What a layout of the block graph is made of: the font's metrics, boxes, arrows,
shortcuts, texts and the layout that holds them (pure geometry, no widgets)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Callable

from ...core.gpt.nodes import Node


@dataclass(frozen=True)
class Metrics:
    """The font's line height and a text-width measure (bold and the large '× N')."""
    line: float
    width: Callable[[str], float]
    bold_width: Callable[[str], float]
    big_width: Callable[[str], float]
    big_line: float


@dataclass
class Box:
    name: str  # hook name
    node: Node
    label: str
    cx: float
    cy: float
    w: float
    h: float

    @property
    def left(self) -> float:
        return self.cx - self.w / 2

    @property
    def right(self) -> float:
        return self.cx + self.w / 2

    @property
    def top(self) -> float:
        return self.cy - self.h / 2

    @property
    def bottom(self) -> float:
        return self.cy + self.h / 2


@dataclass
class Arrow:
    source: str  # the hook name whose tensor flows along it (its label's key)
    target: str  # a hook name, or "" for a cap
    points: list[tuple[float, float]]
    label: tuple[float, float] | None = None  # the label's top-left corner
    label_right: bool = False  # the label ends at that x (it is written leftwards)
    dashed: bool = False


@dataclass
class Shortcut:
    add: str  # the add it enters
    source: str  # the node whose output it carries
    points: list[tuple[float, float]]  # from the fork on the source's arrow to the add
    label: tuple[float, float]  # the rotated word's anchor (bottom-left before rotation)


class TextKind(StrEnum):
    """What a text of the graph is, which sets its font, colour and behaviour."""
    TITLE = "title"  # the block's title
    FF_TITLE = "ff-title"  # a frame's title: the feed-forward's
    ATT_TITLE = "att-title"  # or attention's
    TIMES = "times"  # the large "× N"
    CAP_BEFORE = "cap-before"  # the fold line of the part before the block
    CAP_AFTER = "cap-after"  # and of the part after it
    NOTE = "note"


# a fold line's side of the block, as the graph's open_caps and toggle_cap name it
CAP_SIDE = {TextKind.CAP_BEFORE: "before", TextKind.CAP_AFTER: "after"}


@dataclass
class Text:
    text: str
    x: float
    y: float
    kind: TextKind


@dataclass
class Layout:
    boxes: dict[str, Box] = field(default_factory=dict)
    arrows: list[Arrow] = field(default_factory=list)
    shortcuts: list[Shortcut] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    frame: tuple[float, float, float, float] = (0, 0, 0, 0)  # the block: x, y, w, h
    ff_frame: tuple[float, float, float, float] | None = None
    ff_name: str = ""
    times: str = ""
    att_frame: tuple[float, float, float, float] | None = None  # attention opened
    att_name: str = ""
    two_line: set[str] = field(default_factory=set)  # nodes that carry their own shape
    idle: set[str] = field(default_factory=set)  # experts no token was routed to


def _box(out: Layout, name: str, node: Node, label: str, cx: float, cy: float, w: float, h: float) -> Box:
    b = Box(name, node, label, cx, cy, w, h)
    out.boxes[name] = b
    return b
