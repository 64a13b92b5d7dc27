"""The one list of views. The main window builds its central area, docks, tabs and the
View menu from it; every view is ``cls(session, engine)``, listens to the session,
submits its own engine jobs, and may offer ``save_settings(store)`` /
``restore_settings(store)`` and a ``visibility_changed(bool)`` (to redraw only when
shown). Adding a view: one module, one line here."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.lessons.game import PREDICTION
from ...core.lessons.quiz import ORDER, SHAPES, VALUES

from .attention_view import AttentionView
from .graph_view import BlockGraphView
from .distributions_view import DistributionsView
from .code_view import CodeView
from .divergence_view import DivergenceView
from .explanation_view import ExplanationView
from .game_view import GameView
from .gelu_view import GeluView
from .gradients_view import GradientsView
from .generation_view import GenerationPanel
from .inspector_view import InspectorView
from .learn_view import LearnView
from .lens_view import LensView
from .model_view import ModelView
from .patching_view import PatchingView
from .ln_compare_view import LnCompareView
from .train_view import TrainPanel
from .whatif_view import WhatIfView
from .branches_view import BranchesView
from .contributions_view import ContributionsView
from .heads_view import HeadsView
from .layers_view import LayersView
from .sampling_view import SamplingView
from .why_view import WhyView


@dataclass(frozen=True)
class ViewSpec:
    attr: str  # the window's attribute for it
    key: str  # its dock's object name (kept in saved layouts)
    title: str
    cls: type
    area: str  # "central", "right" (tabbed together) or "bottom"
    shortcut: str | None = None  # shows and raises it
    tab: str | None = None  # a shorter text for its tab (the title stays in the menu)
    covered_by: frozenset = frozenset()  # kinds of Learn question it would answer (core.quiz)

    @property
    def tab_text(self) -> str:
        return self.tab or self.title


_ORDER, _VALUES = frozenset({ORDER}), frozenset({VALUES})
_ANY = frozenset({ORDER, SHAPES, VALUES})
_GUESS = frozenset({PREDICTION})  # a round of the prediction game is open
VIEWS = (
    # the graph draws the order (and says Pre-LN or Post-LN); it leaves out shapes itself
    ViewSpec("graph", "graph", "Block graph", BlockGraphView, "central", covered_by=_ORDER),
    ViewSpec("inspector", "inspector", "Tensor inspector", InspectorView, "right", "Ctrl+1",
             "Inspector", _ANY | _GUESS),
    ViewSpec("explanation", "explain", "Explain", ExplanationView, "right", "Ctrl+2",
             covered_by=_ANY),
    ViewSpec("learn", "learn", "Learn", LearnView, "right", "Ctrl+3"),
    ViewSpec("gelu", "gelu", "GELU", GeluView, "right", "Ctrl+4", covered_by=_VALUES),
    ViewSpec("distributions", "distributions", "Distributions", DistributionsView, "right",
             "Ctrl+5", covered_by=_VALUES),
    ViewSpec("attention", "attention", "Attention", AttentionView, "right", "Ctrl+6",
             covered_by=_VALUES),
    ViewSpec("lens", "lens", "Logit lens", LensView, "right", "Ctrl+7", covered_by=_GUESS),
    ViewSpec("ln_compare", "ln_compare", "Pre-LN vs Post-LN", LnCompareView, "right", "Ctrl+8",
             "Pre/Post-LN", _ORDER),
    ViewSpec("divergence", "divergence", "Divergence", DivergenceView, "right", "Ctrl+9"),
    ViewSpec("train_panel", "train", "Train", TrainPanel, "right", "Ctrl+0"),
    # the bottom tabs, under the graph: the prompt panel in front
    ViewSpec("generation", "generation", "Prompt and generation", GenerationPanel, "bottom",
             "Ctrl+L", covered_by=_GUESS),
    ViewSpec("code", "code", "Code and forward trace", CodeView, "bottom", "Ctrl+Shift+C",
             "Code", _ANY),
    ViewSpec("gradients", "gradients", "Gradients through the shortcuts", GradientsView, "bottom",
             "Ctrl+Shift+D", "Gradients", _VALUES),
    ViewSpec("whatif", "whatif", "What if: interventions", WhatIfView, "bottom", "Ctrl+Shift+I",
             "What if"),
    ViewSpec("patching", "patching", "Activation patching", PatchingView, "bottom",
             "Ctrl+Shift+T", "Patching"),
    ViewSpec("model", "model", "Model and its parameters", ModelView, "bottom", "Ctrl+Shift+P",
             "Model"),
    ViewSpec("sampling", "sampling", "Next-token sampling", SamplingView, "bottom",
             "Ctrl+Shift+N", "Sampling", _GUESS),
    ViewSpec("game", "game", "Prediction game", GameView, "bottom", "Ctrl+Shift+J", "Game"),
    ViewSpec("branches", "branches", "Branches side by side", BranchesView, "bottom",
             "Ctrl+Shift+B", "Branches", _GUESS),
    ViewSpec("why", "why", "Why this token?", WhyView, "bottom", "Ctrl+Shift+W", "Why", _GUESS),
    ViewSpec("layers", "layers", "Layer table", LayersView, "bottom", "Ctrl+Shift+L", "Layers",
             _GUESS),
    ViewSpec("heads", "heads", "Head roles", HeadsView, "bottom", "Ctrl+Shift+H", "Heads"),
    ViewSpec("contributions", "contributions", "Contribution graph", ContributionsView, "bottom",
             "Ctrl+Shift+K", "Contributions", _GUESS),
)
