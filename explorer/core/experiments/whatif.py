"""Clean against changed: the same prompt continued greedily by the model as it is and
with the interventions applied, token by token, and at every step the two next-token
distributions on the same prefix (the clean continuation's, so that the steps stay
comparable once the texts part): their KL divergence and the top candidates of both
with the change in log-probability. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..base.cancel import check
from ..run.generation import GenerationSettings, generate
from .interventions import Resolved, applied
from ..gpt.block_model import BlockModel
from ..gpt.tokenizer import Tokenizer, gpt2_tokenizer, tokenizer_of


@dataclass(frozen=True)
class Candidate:
    piece: str
    clean: float  # probability without the interventions
    changed: float  # with them
    delta_logp: float  # log changed − log clean


@dataclass(frozen=True)
class StepDiff:
    index: int
    clean_id: int
    changed_id: int
    kl: float  # KL(clean ‖ changed) of the next-token distributions on the clean prefix
    top: tuple[Candidate, ...]


@dataclass(frozen=True)
class Comparison:
    prompt_ids: tuple[int, ...]
    clean_ids: tuple[int, ...]
    changed_ids: tuple[int, ...]
    steps: tuple[StepDiff, ...]
    tokenizer: Tokenizer = field(default_factory=gpt2_tokenizer, compare=False, repr=False)

    def first_difference(self) -> int | None:
        return next((s.index for s in self.steps if s.clean_id != s.changed_id), None)

    def text(self, which: str) -> str:
        ids = self.clean_ids if which == "clean" else self.changed_ids
        return "".join(self.tokenizer.token_piece(i) for i in ids)


def _distributions(model: BlockModel, ids: list[int], first: int) -> torch.Tensor:
    device = next(model.parameters()).device
    with torch.inference_mode():
        logits = model(torch.tensor([ids], device=device))[0, first:]  # (steps, V)
    return torch.log_softmax(logits.float(), dim=-1)


def compare(model: BlockModel, resolved: list[Resolved], prompt_ids: list[int],
            new_tokens: int = 10, should_stop=None, top: int = 3) -> Comparison:
    """Greedy continuations without and with ``resolved`` and the per-step differences."""
    settings = GenerationSettings(max_new_tokens=new_tokens, stop_at_eot=False)
    ids = list(prompt_ids)[-(model.cfg.context_length - new_tokens):]
    clean = generate(model, ids, settings).new_ids
    check(should_stop)
    with applied(model, resolved):
        changed = generate(model, ids, settings).new_ids
    check(should_stop)
    seq = ids + clean[:-1]  # each step's prefix: the prompt and the clean tokens so far
    p = _distributions(model, seq, len(ids) - 1)
    with applied(model, resolved):
        q = _distributions(model, seq, len(ids) - 1)
    steps = []
    for k in range(len(clean)):
        kl = float((p[k].exp() * (p[k] - q[k])).sum())
        chosen = list(dict.fromkeys(torch.topk(p[k], top).indices.tolist()
                                    + torch.topk(q[k], top).indices.tolist()))
        steps.append(StepDiff(k, clean[k], changed[k], max(kl, 0.0), tuple(
            Candidate(tokenizer_of(model).token_piece(i), float(p[k, i].exp()), float(q[k, i].exp()),
                      float(q[k, i] - p[k, i])) for i in chosen)))
    return Comparison(tuple(ids), tuple(clean), tuple(changed), tuple(steps), tokenizer_of(model))
