"""A block family is one file: here the file's worth is this test's own — a record "like
GPT-2's, except" for one extra node (CaiT's LayerScale on the feed-forward branch: each
value times a learned factor) and its model, written out whole — registered once. The
graph, the inspector, capture, a saved run and the Code view then show it, with no line
of any other module changed for it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from torch import nn

from explorer.core.gpt.block_model import BlockModel
from explorer.core.gpt.build import build_model
from explorer.core.gpt.config import GPTConfig
from explorer.core.gpt.families import registered
from explorer.core.gpt.families.gpt2 import GPT2
from explorer.core.gpt.family import Classes, ModelCode, NormPosition
from explorer.core.gpt.layers import FeedForward, MultiHeadAttention
from explorer.core.gpt.model import GPTModel, TransformerBlock
from explorer.core.gpt.node_types import Node

# ----------------------------------------------------------------- the family's file


class LayerScale(nn.Module):
    """x · gamma: one learned factor per value (CaiT, DINOv2), small at the start."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), 0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class ScaledBlock(TransformerBlock):
    """GPT-2's Pre-LN block with the feed-forward's output scaled before its add."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.ls2 = LayerScale(cfg.emb_dim)

    def forward(self, x: torch.Tensor, kv=None, pos: int = 0) -> torch.Tensor:
        shortcut = x  # (B, T, C)
        x = self.norm1(x)
        x = self.att(x, kv, pos)
        x = self.drop_shortcut(x)
        x = self.drop1(x)
        x = x + shortcut
        x = self.add1(x)
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.ls2(x)
        x = self.drop_shortcut(x)
        x = self.drop2(x)
        x = x + shortcut
        x = self.add2(x)
        return x


class ScaledModel(GPTModel):
    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.trf_blocks = nn.Sequential(*[ScaledBlock(cfg) for _ in range(cfg.n_layers)])
        self.tie_weights()


def _initialise(model, seed=0, should_stop=None):
    GPT2.model.initialise(model, seed, should_stop)
    with torch.no_grad():
        for block in model.trf_blocks:
            block.ls2.gamma.fill_(0.1)
    return model


LS2 = Node("ls2", "LayerScale", "The feed-forward's output times one learned factor per "
           "value (a diagonal matrix), before its add.", "linear", "emb")
_PRE = []
for _node in GPT2.orders[NormPosition.PRE]:
    _PRE.append(replace(_node, same_in_eval="ls2") if _node.key == "drop2" else _node)
    if _node.key == "ff":
        _PRE.append(LS2)

SCALED = replace(
    GPT2, name="gpt2-layerscale", title="GPT-2 with LayerScale",
    orders={NormPosition.PRE: tuple(_PRE)},
    shortcuts={NormPosition.PRE: GPT2.shortcuts[NormPosition.PRE]},
    residuals={NormPosition.PRE: GPT2.residuals[NormPosition.PRE]},
    model=ModelCode(ScaledModel, _initialise, lambda: Classes(
        ScaledModel, ScaledBlock, MultiHeadAttention, FeedForward, {NormPosition.PRE: "forward"},
        attention_forward="book_forward")),
    presets={}, beside=(), block_title=None)

# ----------------------------------------------------------------- what sees it

PROMPT_IDS = [6109, 3626, 6100, 345]  # "Every effort moves you" in GPT-2's vocabulary


def _config() -> GPTConfig:
    return GPTConfig(family=SCALED, context_length=64, emb_dim=32, n_heads=4, n_layers=2)


def test_capture_and_a_saved_run_see_the_new_node_with_its_numbers(tmp_path):
    from explorer.core.gpt.nodes import all_hook_names, node_for_hook, order_of
    from explorer.core.playground.run_file import SavedRun, read_run, save_run, weights_sha256
    from explorer.core.run.generation import GenerationSettings
    from explorer.core.run.passes import EVERYTHING, prompt_then_generate

    with registered(SCALED):
        cfg = _config()
        model = build_model(cfg, seed=3)
        assert isinstance(model, BlockModel) and isinstance(model.trf_blocks[1], ScaledBlock)
        names = all_hook_names(cfg)
        assert names.index("trf_blocks.0.ff") + 1 == names.index("trf_blocks.0.ls2")
        assert node_for_hook("trf_blocks.1.ls2", order_of(cfg)).label == "LayerScale"
        s = GenerationSettings(max_new_tokens=2, seed=1)
        passes = []
        prompt_then_generate(model, PROMPT_IDS, s, passes.append, keep=EVERYTHING)
        passes = [p for p in passes if hasattr(p, "views")]
        views = passes[0].views
        ls2, ff = views["trf_blocks.1.ls2"], views["trf_blocks.1.ff"]
        assert ls2.shape == (1, 4, 32)
        np.testing.assert_allclose(ls2.array, ff.array * 0.1, rtol=1e-6)
        # dropout in eval mode is the LayerScale's very tensor, as the table says
        np.testing.assert_array_equal(views["trf_blocks.1.drop2"].array, ls2.array)
        run = SavedRun("Every effort moves you", PROMPT_IDS,
                       {"label": "layerscale", "sha256": weights_sha256(model),
                        "config": cfg.to_dict()}, s, passes)
        back = read_run(save_run(tmp_path / "run.gbrun", run))
        assert back.config.family is SCALED and back.config == cfg
        saved = back.passes[0].views["trf_blocks.1.ls2"]
        assert saved.shape == (1, 4, 32) and saved.stats.mean == ls2.stats.mean
    assert cfg.to_dict()["family"] == "gpt2-layerscale"


def test_the_graph_the_inspector_and_the_code_view_show_the_new_node(qtbot):
    from explorer.core.weights.checkpoints import LoadedModel
    from explorer.ui.views.learn.code_view import CodeView
    from explorer.ui.views.look.inspector_view import InspectorView
    from tests.ui.alone import Alone

    with registered(SCALED):
        cfg = _config()
        model = build_model(cfg, seed=3)
        alone = Alone(qtbot, loaded=LoadedModel(model, cfg, "preset", "layerscale", trained=False))
        graph = alone.graph
        assert {"trf_blocks.0.ff", "trf_blocks.0.ls2", "trf_blocks.0.drop2"} <= set(graph.items)
        ff, ls2, drop2 = (graph.items[f"trf_blocks.0.{k}"].sceneBoundingRect()
                          for k in ("ff", "ls2", "drop2"))
        assert not ls2.intersects(ff) and not ls2.intersects(drop2)
        assert "trf_blocks.0.ls2" in graph.edges  # an arrow leaves it, to the dropout
        alone.run(max_tokens=1)
        alone.session.show_step(None)
        inspector = alone.view(InspectorView)
        alone.session.set_node("trf_blocks.0.ls2")
        alone.settle()
        assert "<b>trf_blocks.0.ls2</b> — LayerScale" in inspector.title.text()
        assert "shape <b>(1, 4, 32)</b>" in inspector.title.text()
        code = alone.view(CodeView)
        alone.session.set_node("trf_blocks.0.ls2")
        built, runs = code.highlighted()
        assert built.strip() == "self.ls2 = LayerScale(cfg.emb_dim)"
        assert runs.strip() == "x = self.ls2(x)"
        assert "ScaledBlock (GPT-2 with LayerScale)" in code.title.text()
