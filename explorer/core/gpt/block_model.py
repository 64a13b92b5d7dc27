"""What every family's model offers the rest of the explorer (``BlockModel``): the
book's module names around the blocks, the forward with a KV cache, the last position
only or no head, its cache, its weights' layout and its tokenizer. Capture, passes,
generation, the lessons and the experiments ask only this; tests/core/gpt/
test_block_model.py checks every registered family's model against it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch
    from torch import nn

    from .config import GPTConfig
    from .tokenizer import Tokenizer


@runtime_checkable
class BlockModel(Protocol):
    """A model of one block family: ``tok_emb``, ``trf_blocks`` (the N blocks, indexed),
    ``final_norm``, ``out_head``; ``cfg`` its config; ``tokenizer`` set by its loader
    (GPT-2's when none is). ``forward(in_idx, cache, last_only, head)``: logits (B, T,
    vocab) for ids (B, T); with ``cache`` (from ``new_cache``) the ids continue the cached
    tokens; ``last_only`` the last position's logits only; ``head=False`` the final norm's
    output instead. ``tie_weights`` shares the head with the embedding when the config
    says so, and lays the weights out for the mode (``lay_out``). It is a torch module:
    ``parameters``, ``get_submodule``, ``train``, ``eval`` …"""

    cfg: "GPTConfig"
    tok_emb: "nn.Embedding"
    trf_blocks: "nn.Module"
    final_norm: "nn.Module"
    out_head: "nn.Linear"

    def forward(self, in_idx: "torch.Tensor", cache: Any = None, last_only: bool = False,
                head: bool = True) -> "torch.Tensor": ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def new_cache(self) -> Any: ...

    def tie_weights(self) -> None: ...

    def lay_out(self) -> None: ...

    def parameters(self, recurse: bool = True) -> Iterator["nn.Parameter"]: ...

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterable[tuple[str, "nn.Parameter"]]: ...

    def get_submodule(self, target: str) -> "nn.Module": ...

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...


def tokenizer_attribute(model: BlockModel) -> "Tokenizer | None":
    """The tokenizer a loader hung on the model, if any."""
    return getattr(model, "tokenizer", None)
