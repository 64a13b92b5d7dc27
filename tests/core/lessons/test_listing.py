"""The Code view's source and the forward trace, for every node of Pre-LN and Post-LN."""

import pytest
import torch

from explorer.core.gpt.node_types import Kind
from explorer.core.run.capture import Capture
from explorer.core.lessons.listing import built_order, listing
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import node_for_hook, parse_hook
from explorer.core.lessons.trace import trace_order, what_changed


@pytest.mark.parametrize("position", ["pre", "post"])
def test_every_node_points_at_the_line_that_built_it_and_the_line_that_made_it(position):
    cfg = preset("tiny", norm_position=position)
    for name in trace_order(cfg):
        found = listing(name, position)
        layer, key = parse_hook(name)
        built, ran = found.init[found.init_line], found.forward[found.forward_line]
        if node_for_hook(name, position).kind in (Kind.NORM, Kind.GELU):  # its own class
            assert found.title == ("LayerNorm" if "norm" in key else "GELU")
            # the book's lines as written, and a word on the fused call that runs them
            assert ran.strip() in ("return self.scale * norm_x + self.shift",
                                   "return 0.5 * x * (1 + torch.tanh(")
            assert "self.scale = " in built or "GELU()" in built
            assert "What runs is F." in found.note and "the same numbers" in found.note
            assert "calls it" in found.note and (f"self.{key}(x)" in found.note or "Sequential" in found.note)
        elif key.startswith("ff.layers."):
            assert "Linear" in built
            assert "self.layers(x)" in ran
        elif key == "att.attn_weights":
            assert "self.attn_weights = HookPoint()" in built and "self.attn_weights(" in ran
        elif key in ("drop1", "drop2", "add1", "add2"):  # the book's line, its hook point next
            module = "drop_shortcut" if key.startswith("drop") else key
            assert f"self.{module} = " in built, (name, built)
            book = "x = self.drop_shortcut(x)" if key.startswith("drop") else "x = x + shortcut"
            assert ran.strip() == book, (name, ran)
            assert f"x = self.{key}(x)" in found.forward[found.forward_line + 1]
        else:
            assert f"self.{key} = " in built, (name, built)
            assert f"self.{key}(" in ran, (name, ran)
        if layer is not None and "." not in key and "norm" not in key:
            assert found.forward_name == f"forward_{position}_ln"


def test_the_forward_order_is_the_node_tables_and_not_the_constructors():
    init = listing("trf_blocks.0.att").init
    assert [m for m in built_order(init) if m in ("att", "ff", "norm1", "norm2", "drop_shortcut")] == \
        ["att", "ff", "norm1", "norm2", "drop_shortcut"]
    for position in ("pre", "post"):
        forward = listing("trf_blocks.0.att", position).forward
        lines = [next(i for i, line in enumerate(forward) if f"self.{key}(" in line)
                 for key in ("norm1", "att", "drop1", "add1", "norm2", "ff", "drop2", "add2")]
        ordered = sorted(range(8), key=lambda i: lines[i])
        expected = [0, 1, 2, 3, 4, 5, 6, 7] if position == "pre" else [1, 2, 3, 0, 5, 6, 7, 4]
        assert ordered == expected, (position, forward)


def test_the_source_shown_is_the_source_that_runs():
    """Editing nothing: the block built from the config computes exactly the lines shown
    (Pre-LN: x + drop(att(norm1(x))) then + drop(ff(norm2(.))))."""
    cfg = preset("tiny")
    block = build_model(cfg, seed=1).trf_blocks[0]
    x = torch.randn(1, 3, cfg.emb_dim)
    with torch.no_grad():
        h = x + block.att(block.norm1(x))
        expected = h + block.ff(block.norm2(h))
        torch.testing.assert_close(block(x), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("position", ["pre", "post"])
def test_the_trace_says_what_changed_with_the_pass_numbers(position):
    cfg = preset("tiny", norm_position=position)
    model = build_model(cfg, seed=2)
    with torch.no_grad(), Capture(model, tensors=True, attention=True) as cap:
        model(torch.tensor([[464, 1049, 11, 290]]))
    views = cap.views()
    order = trace_order(cfg)
    assert order[0] == "tok_emb" and order[-1] == "out_head" and len(order) == len(views)
    for name in order:
        sentence = what_changed(name, views, cfg)
        assert str(views[name].shape) in sentence and f"{views[name].stats.std:.3g}" in sentence
        assert sentence.startswith(node_for_hook(name).label)
    assert "feature dimension from 32 to 128" in what_changed("trf_blocks.0.ff.layers.0", views, cfg)
    assert "from 32 to 50257" in what_changed("out_head", views, cfg)
    assert "value for value the same as trf_blocks.0.att" in what_changed("trf_blocks.0.drop1", views, cfg)
    assert "the shortcut drop_emb" in what_changed("trf_blocks.0.add1", views, cfg)
    second = "trf_blocks.0.add1" if position == "pre" else "trf_blocks.0.norm1"
    assert f"the shortcut {second}" in what_changed("trf_blocks.0.add2", views, cfg)


def test_the_blocks_forward_is_the_books_lines_in_the_books_order():
    """TransformerBlock.forward_pre_ln holds the book's forward (tests/book_model.py),
    line for line and in order; what it adds are hook points on lines of their own."""
    import inspect
    import textwrap

    from tests.book_model import TransformerBlock as BookBlock
    book = [line.strip() for line in textwrap.dedent(inspect.getsource(BookBlock.forward)).splitlines()[1:]]
    ours = [line.split("#")[0].strip() for line in listing("trf_blocks.0.att").forward[1:]]
    it = iter(ours)
    assert all(any(line == mine or line.replace("(x)", "(x, kv, pos)") == mine for mine in it)
               for line in book), (book, ours)
    extra = [line for line in ours if line not in book and "kv, pos" not in line]
    assert extra and all(line.startswith("x = self.") and line.endswith("(x)") for line in extra)


def test_the_book_forward_shown_computes_what_runs():
    """The lines the Code view shows for LayerNorm and GELU (the book's) give the numbers
    the fused calls that run give."""
    import torch
    from explorer.core.gpt.layers import GELU, LayerNorm
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16) * 3
    norm = LayerNorm(16)
    with torch.no_grad():
        norm.scale.uniform_(0.5, 1.5)
        norm.shift.normal_()
    torch.testing.assert_close(norm.book_forward(x), norm(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(GELU().book_forward(x), GELU()(x), atol=1e-6, rtol=1e-5)


def test_an_experts_step_is_its_modulelists_element_in_the_mixtures_forward():
    """ff.fc1.3 is fc1[3] of MoEFeedForward: the line that builds the ModuleList and the
    forward's line that runs element e on the tokens routed to it."""
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.nodes import order_of
    order = order_of(preset("qwen3moe-tiny"))
    for step in ("fc1", "fc2", "silu", "product", "fc3"):
        found = listing(f"trf_blocks.1.ff.{step}.3", order)
        assert found.title == "MoEFeedForward"
        assert found.init[found.init_line].strip().startswith(f"self.{step} = nn.ModuleList(")
        assert f"self.{step}[e](" in found.forward[found.forward_line]
        assert found.note.startswith(f"{step}[3] is expert 3's {step}, element 3 of the "
                                     f"nn.ModuleList {step}")
