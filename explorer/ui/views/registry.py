"""The one list of views and the workspaces that group them by what the user is doing.

The window, its View menu, Help ▸ Tour, the cover service and the README's list of views
all read ``WORKSPACES`` and ``VIEWS``; each view's module lives in its workspace's folder
(``ui/views/<group>/<key>_view.py``), and a view's class is imported only when the view
is first built. Every view is ``cls(session, engine)``, listens to the session, runs its
jobs through ``ui.base.view_jobs.ViewJobs`` and may offer the ``ViewHooks``.

Adding a view: its module in its workspace's folder, one line here."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ...core.lessons.facts import ORDER, PREDICTION, SHAPES, VALUES
from ..base import preload


@dataclass(frozen=True)
class Workspace:
    key: str  # its folder under ui/views, and its settings' name
    title: str
    shortcut: str
    task: str  # what the user does there, in one sentence


WORKSPACES = (
    Workspace("look", "Look", "Ctrl+1", "See the real values at every node: the selected "
              "tensor, every node's distribution, the activation, attention and the logit lens."),
    Workspace("learn", "Learn", "Ctrl+2", "Predict before you see, read what each node does "
              "and its formula, step through the book's code, and see why the norms sit where "
              "they do."),
    Workspace("why", "Why", "Ctrl+3", "Ask why the model chose a token: each block's, "
              "head's and neuron's part of its logit, the layer table, head roles and the "
              "contribution graph."),
    Workspace("experiment", "Experiment", "Ctrl+4", "Change the model and see what follows: "
              "interventions, activation patching, where two models part, and training a "
              "small model here."),
    Workspace("play", "Play", "Ctrl+5", "Play with generation: the next token's candidates, "
              "sampling settings live, branches side by side, and the prediction game."),
)
SHARED = "shared"  # the block graph and the prompt: in every workspace


@dataclass(frozen=True)
class ViewSpec:
    key: str  # its dock's object name, its settings' name, window.view(key)
    title: str
    group: str  # a workspace's key, or SHARED
    cls_name: str  # "<group>.<module>:<Class>" under ui/views, imported when first built
    tour: str  # one sentence for Help ▸ Tour and the README
    shortcut: str | None = None  # shows and raises it
    tab: str | None = None  # a shorter text for its tab (the title stays in the menu)
    shows: frozenset = frozenset()  # kinds of fact it shows: covered while one would answer

    @property
    def tab_text(self) -> str:
        return self.tab or self.title

    @property
    def module(self) -> str:
        return f"{__package__}.{self.cls_name.split(':')[0]}"

    @property
    def cls(self) -> type:
        """The view's class (its module imported now, once, after the plotting library's
        import on its thread has ended)."""
        preload.wait()
        return getattr(importlib.import_module(self.module), self.cls_name.split(":")[1])


_ALL = frozenset({SHAPES, ORDER, VALUES, PREDICTION})
_NUMBERS = frozenset({SHAPES, VALUES, PREDICTION})
VIEWS = (
    # in every workspace: the graph in the centre (it draws the order; its shapes and
    # texts are masked by itself) and the prompt under it
    ViewSpec("graph", "Block graph", SHARED, "shared.graph_view:BlockGraphView",
             "One whole transformer block in forward order, with its shortcuts and every "
             "tensor's shape. Click a node to inspect it; Up and Down change the block; the "
             "caps unfold the embeddings and the head.", shows=frozenset({ORDER})),
    ViewSpec("prompt", "Prompt and generation", SHARED, "shared.prompt_view:PromptPanel",
             "Type a prompt and press Ctrl+Enter: every node is captured, then tokens arrive "
             "one by one. Click one to see every view at that step.", "Ctrl+L",
             shows=frozenset({PREDICTION})),
    # Look
    ViewSpec("inspector", "Tensor inspector", "look", "look.inspector_view:InspectorView",
             "The selected node's real values: statistics, histogram, heatmap, token norms "
             "and the raw numbers.", "Ctrl+Shift+I", "Inspector", _ALL),
    ViewSpec("distributions", "Distributions", "look", "look.distributions_view:DistributionsView",
             "Every node's values side by side, and a statistic per node and block.",
             "Ctrl+Shift+D", shows=_ALL),  # its plots and rows in the block's order
    ViewSpec("gelu", "Activation", "look", "look.gelu_view:GeluView",
             "The feed-forward's activation, GELU (SiLU on a Llama block), with the real "
             "distribution of its inputs in this block.",
             "Ctrl+Shift+U", shows=frozenset({VALUES})),
    ViewSpec("attention", "Attention", "look", "look.attention_view:AttentionView",
             "Every head's weights, scores or masked scores, one head large, and one "
             "query's row.", "Ctrl+Shift+A", shows=_NUMBERS),
    ViewSpec("weights", "Weight matrices", "look", "look.weights_view:WeightsView",
             "A Linear's, an embedding's or the head's matrix: a heatmap, drawn to scale, its "
             "norm and singular values, and what it did to the token.", "Ctrl+Shift+Z",
             shows=_NUMBERS),
    ViewSpec("lens", "Logit lens", "look", "look.lens_view:LensView",
             "The next tokens read off the residual stream after each add.", "Ctrl+Shift+L",
             shows=frozenset({PREDICTION})),
    # Learn
    ViewSpec("learn", "Learn", "learn", "learn.learn_view:LearnView",
             "Predict before you see: a question about the node, then the real tensor.",
             "Ctrl+Shift+Q"),
    ViewSpec("explain", "Explain", "learn", "learn.explanation_view:ExplanationView",
             "What the node does, what it did here, its formula worked with this token's "
             "numbers, and the common mistake.", "Ctrl+Shift+E", shows=_ALL),
    ViewSpec("code", "Code and forward trace", "learn", "learn.code_view:CodeView",
             "The book's code that produced the node, and a step-by-step trace of the pass.",
             "Ctrl+Shift+C", "Code", _ALL),
    ViewSpec("model", "Model and its parameters", "learn", "learn.model_view:ModelView",
             "Where the parameter count comes from, and what the feed-forward's width costs.",
             "Ctrl+Shift+P", "Model", frozenset({SHAPES, ORDER})),
    ViewSpec("ln_compare", "Where the norm sits", "learn", "learn.ln_compare_view:LnCompareView",
             "The model and its twin with the norms moved, the gradient experiment, and every "
             "placement's stability side by side.",
             "Ctrl+Shift+F", "Norms", frozenset({ORDER, VALUES})),
    ViewSpec("blocks", "GPT-2 beside Llama", "learn", "learn.blocks_view:BlocksView",
             "GPT-2's block beside the Llama / Qwen block: the parts that do the same job "
             "joined, their parameters and KV cache, their values on the prompt, and RoPE.",
             "Ctrl+Alt+B", "Blocks", _ALL),
    ViewSpec("gradients", "Gradients through the shortcuts", "learn",
             "learn.gradients_view:GradientsView",
             "The gradient at every node, with and without the shortcuts.", "Ctrl+Shift+B",
             "Gradients", frozenset({VALUES, ORDER})),  # its nodes listed in the block's order
    # Why
    ViewSpec("why", "Why this token?", "why", "why.why_view:WhyView",
             "Each block's, head's and neuron's part of the token's logit, as a waterfall from "
             "the embeddings to the logit.", "Ctrl+Shift+W", "Why", frozenset({PREDICTION, VALUES})),
    ViewSpec("layers", "Layer table", "why", "why.layers_view:LayersView",
             "One row per block: the stream's size, each branch against its shortcut, the "
             "lens's token and the block's part of the logit.", "Ctrl+Shift+Y", "Layers",
             frozenset({PREDICTION, VALUES})),
    ViewSpec("heads", "Head roles", "why", "why.heads_view:HeadsView",
             "Each head scored as previous-token, first-token, current-token, local and "
             "induction, with its pattern.", "Ctrl+Shift+H", "Heads", frozenset({VALUES})),
    ViewSpec("routing", "Expert routing", "why", "why.routing_view:RoutingView",
             "In a mixture of experts, the experts each token goes to, their load and the "
             "balancing loss.", "Ctrl+Alt+E", tab="Routing", shows=_NUMBERS),
    ViewSpec("contributions", "Contribution graph", "why",
             "why.contributions_view:ContributionsView",
             "Each token's stream after every block, with an edge from every head and "
             "feed-forward block that brought a large share of it.", "Ctrl+Shift+K",
             "Contributions", frozenset({PREDICTION, VALUES})),
    # Experiment
    ViewSpec("whatif", "What if: interventions", "experiment", "experiment.whatif_view:WhatIfView",
             "Zero, scale, steer or patch a node, knock out heads or a shortcut — and the clean "
             "and changed continuations side by side.", "Ctrl+Shift+X", "What if",
             frozenset({PREDICTION})),
    ViewSpec("patching", "Activation patching", "experiment",
             "experiment.patching_view:PatchingView",
             "How much of a logit difference each node brings back when patched from a clean "
             "run.",
             "Ctrl+Shift+T", "Patching", frozenset({PREDICTION, VALUES})),
    ViewSpec("divergence", "Divergence", "experiment", "experiment.divergence_view:DivergenceView",
             "A model B changed in one place: where the two first part.", "Ctrl+Shift+V",
             shows=frozenset({VALUES})),
    ViewSpec("train", "Train", "experiment", "experiment.train_view:TrainPanel",
             "Train a small GPT on a text here, with the loss curve and samples.",
             "Ctrl+Shift+M", shows=frozenset({PREDICTION, ORDER})),  # samples; nodes in order
    # Play
    ViewSpec("next_token", "Next token", "play", "play.next_token_view:NextTokenView",
             "The shown step's most likely next tokens; right-click one to ask why or to "
             "continue with it.", "Ctrl+Shift+N", shows=frozenset({PREDICTION})),
    ViewSpec("sampling", "Next-token sampling", "play", "play.sampling_view:SamplingView",
             "The next-token distribution reshaped live by temperature, top-k and top-p, "
             "with 200 seeded draws beside it.", "Ctrl+Shift+S", "Sampling",
             frozenset({PREDICTION})),
    ViewSpec("branches", "Branches side by side", "play", "play.branches_view:BranchesView",
             "Two branches of a run side by side at the step where they part.", None,
             "Branches", frozenset({PREDICTION, VALUES})),
    ViewSpec("game", "Prediction game", "play", "play.game_view:GameView",
             "Guess the next token before the model shows it, or the block where the lens "
             "first finds it.", "Ctrl+Shift+J", "Game"),
)
BY_KEY = {spec.key: spec for spec in VIEWS}


def in_workspace(key: str) -> list[ViewSpec]:
    """A workspace's own views, in their order (the shared ones aside)."""
    return [spec for spec in VIEWS if spec.group == key]


def markdown() -> str:
    """The README's list of workspaces and their views (a test keeps the README equal)."""
    lines = []
    for ws in WORKSPACES:
        lines.append(f"- **{ws.title}** ({ws.shortcut}): {ws.task}")
        for spec in in_workspace(ws.key):
            keys = f" ({spec.shortcut})" if spec.shortcut else ""
            lines.append(f"  - *{spec.title}*{keys}: {spec.tour}")
    return "\n".join(lines)
