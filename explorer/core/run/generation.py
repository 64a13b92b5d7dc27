"""Token-by-token generation as a plain Python generator (no Qt, no threads).

``generate_stream`` yields one ``Step`` per new token. It keeps a KV cache, so each step
runs the model on one token; the caller stops generation simply by not asking for the
next step (or by ``close()``), which takes effect before the next token is computed.
Given a ``Prefill`` (passes.prompt_and_prefill: the captured prompt pass), it continues
from there instead of running the prompt again. Owns sampling and prompt preparation;
the model and the tokenizer are given to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import torch

from . import graph_decode
from .largest import arg_max, most_likely, top_k
from .steps import StepCapture, StepRecorder
from ..gpt.config import LIMITS
from ..gpt.layers import KVCache
from ..gpt.block_model import BlockModel
from ..gpt.tokenizer import Tokenizer, gpt2_tokenizer, tokenizer_of


MAX_NEW_TOKENS = 100_000
RUN_STEPS = 1_024  # the most tokens a run in the window generates, and a saved run holds
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0
MAX_PROMPT_CHARS = 1_000_000  # a prompt's text, kept, remembered or saved (the box shows it whole)
# Each sampling setting's range, one table for the command line, the window's boxes and
# a saved run's reader: whatever one accepts the others hold (a Qt box holds a 32-bit
# whole number; top-p's box six decimals). Top-k is bounded by the model's vocabulary
# too (``validate``), as the candidates shown are.
BOUNDS = {"temperature": (MIN_TEMPERATURE, MAX_TEMPERATURE), "top_k": (1, LIMITS["vocab_size"]),
          "top_p": (1e-6, 1.0), "seed": (0, 2**31 - 1), "show_top_k": (1, LIMITS["vocab_size"])}


@dataclass(frozen=True)
class GenerationSettings:
    """How to pick each next token. ``greedy`` takes the argmax; otherwise sampling with
    ``temperature``, then ``top_k`` and ``top_p`` filtering, from a ``seed``."""

    max_new_tokens: int = 20
    greedy: bool = True
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = 0
    stop_at_eot: bool = True
    show_top_k: int = 5  # candidates reported per step
    capture_steps: bool = False  # attach every node's vector and statistics to each step
    leave_room: bool = False  # crop the prompt so the new tokens fit in the context
    # every step runs the whole context again, as the book's generate_text_simple does
    # (no KV cache): slower, and each step's pass sees (1, T + k, C)
    recompute: bool = False

    def validate(self, vocab_size: int) -> None:
        """Every setting of the right type and in a range where the probabilities stay
        finite (a temperature of 1e-40 turns them into inf and nan) — the sampling ones
        too when the run is greedy: a setting is kept, shown and saved either way."""
        from ..base.validate import real, whole

        vocab = min(vocab_size, BOUNDS["top_k"][1])
        checks = [lambda: whole(self.max_new_tokens, "max new tokens", 1, MAX_NEW_TOKENS),
                  lambda: whole(self.show_top_k, "the candidates shown", 1, vocab_size),
                  lambda: real(self.temperature, "temperature", *BOUNDS["temperature"])]
        if self.top_k is not None:
            checks.append(lambda: whole(self.top_k, "top-k", 1, vocab))
        if self.top_p is not None:
            checks.append(lambda: real(self.top_p, "top-p", *BOUNDS["top_p"]))
        if self.seed is not None:
            checks.append(lambda: whole(self.seed, "the sampling seed", *BOUNDS["seed"]))
        for name in ("greedy", "stop_at_eot", "capture_steps", "leave_room", "recompute"):
            checks.append(lambda name=name: _switch(getattr(self, name), name))
        problems = []
        for check_one in checks:
            try:
                check_one()
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("invalid generation settings: " + "; ".join(problems))


def _switch(value, name: str) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


@dataclass(frozen=True)
class Step:
    """One generated token, as the model saw it."""

    index: int  # 0 for the first new token
    position: int  # its position in the sequence (prompt tokens come first)
    token_id: int
    piece: str  # the token's own display piece (byte escapes if partial UTF-8)
    text: str  # text to append to the output (partial UTF-8 held back until complete)
    prob: float  # the model's probability of this token (softmax of the raw logits)
    top_ids: tuple[int, ...]  # the model's most likely candidates at this step
    top_probs: tuple[float, ...]
    elapsed: float  # seconds since generation started (prompt pass included)
    step_seconds: float  # seconds this token took
    is_eot: bool = False
    # With capture_steps: every node at the position whose forward pass chose this
    # token (position - 1), i.e. what the model computed to predict it.
    capture: StepCapture | None = None
    # With capture_steps: the logits this token was drawn from (vocab,), float32, so that
    # other settings can reshape the distribution without running the model again
    logits: np.ndarray | None = None


@dataclass
class Prefill:
    """Where generation continues after a prompt pass run elsewhere: the prompt's ids,
    its KV cache, the last position's logits (vocab,) and, for step capture, every
    node's vector at that position."""

    ids: list[int]
    cache: KVCache
    logits: torch.Tensor
    step: StepCapture | None
    seconds: float


def check_vocabulary(ids, vocab_size: int, tokenizer: Tokenizer | None = None) -> None:
    """Every id must be a row of the model's embedding: a ValueError names the first
    that is not (a model trained with another, smaller vocabulary than its tokenizer's)."""
    tok = tokenizer or gpt2_tokenizer()
    for i in ids:
        if not 0 <= int(i) < vocab_size:
            raise ValueError(f"token {int(i)} ({tok.token_piece(int(i))!r}) is outside this model's "
                             f"vocabulary of {vocab_size:,} tokens: the model was not trained "
                             f"with {tok.name}'s full tokenizer, so this prompt cannot run on it")


def prepare_prompt(ids: list[int], context_length: int, start_with_eot: bool = False,
                   new_tokens: int = 0, leave_room: bool = False,
                   tokenizer: Tokenizer | None = None) -> tuple[list[int], list[str]]:
    """The ids the model will see and notices for the user. An empty prompt is an error
    unless ``start_with_eot``; a prompt longer than the context is cropped from the left.
    With ``new_tokens`` to generate: ``leave_room`` crops the prompt so that they fit
    in the context (the KV cache then serves every step); without it a notice says
    when the context fills and each further token recomputes the whole window."""
    ids = [int(i) for i in ids]
    notices = []
    tok = tokenizer or gpt2_tokenizer()
    if not ids:
        if not start_with_eot or tok.eot_id is None:
            raise ValueError("the prompt is empty: type some text" + (
                f", or start from {tok.eot_text} explicitly" if tok.eot_id is not None else ""))
        ids = [tok.eot_id]
        notices.append(f"empty prompt: starting from {tok.eot_text}")
    room = min(max(0, new_tokens), context_length - 1) if leave_room else 0
    keep = context_length - room
    if len(ids) > keep:
        why = f" to leave room for {room} new tokens" if room else ""
        notices.append(f"the first {len(ids) - keep} were dropped{why} (context "
                       f"{context_length})")
        ids = ids[-keep:]
    full = context_length - len(ids)  # new tokens before the context is full
    if new_tokens > full and not leave_room:
        notices.append(f"the context is full after {full} new tokens: later ones recompute "
                       f"all {context_length} positions without the KV cache (slow)")
    return ids, notices


def sampler(s: GenerationSettings) -> torch.Generator | None:
    """The random generator sampling draws from (None for greedy or an unseeded run)."""
    return torch.Generator().manual_seed(s.seed) if (not s.greedy and s.seed is not None) else None


def sampling_probabilities(logits: torch.Tensor, s: GenerationSettings) -> torch.Tensor:
    """The distribution a token is drawn from, (vocab,) on the CPU: the logits over the
    temperature, then top-k and top-p cut (a cut token's probability is exactly 0);
    greedy puts everything on the most likely token. ``pick`` draws from this, and the
    live sampling view shows it."""
    logits = logits.float().cpu()  # every row of the model's vocabulary
    if s.greedy:
        probs = torch.zeros_like(logits)
        probs[arg_max(logits)] = 1.0
        return probs
    scaled = logits / s.temperature
    if s.top_k is not None and s.top_k < scaled.numel():
        kth = top_k(scaled, s.top_k)[0][-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if s.top_p is not None and s.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        remove = cumulative > s.top_p
        remove[1:] = remove[:-1].clone()  # keep the token that crosses top_p
        remove[0] = False
        scaled[order[remove]] = float("-inf")
    return torch.softmax(scaled, dim=-1)


def pick(logits: torch.Tensor, s: GenerationSettings, gen: torch.Generator | None) -> int:
    """Choose the next id from one row of logits (vocab,)."""
    if s.greedy:
        return arg_max(logits)
    return int(torch.multinomial(sampling_probabilities(logits, s), 1, generator=gen))


class GenerationStream:
    """Iterator of ``Step``s. Before the first step, ``prompt_ids`` and ``notices`` tell
    what the model will see; after it, ``prompt_seconds`` is the prompt pass's time."""

    def __init__(self, model: BlockModel, prompt_ids: list[int],
                 settings: GenerationSettings = GenerationSettings(),
                 start_with_eot: bool = False, prefill: Prefill | None = None,
                 forced: list[int] | None = None) -> None:
        settings.validate(model.cfg.vocab_size)
        if forced is not None:  # a saved run replayed: these tokens, not the sampler's
            check_vocabulary(list(forced), model.cfg.vocab_size)
        self.forced = None if forced is None else list(forced)
        self.model = model
        self.settings = settings
        self.prompt_ids, self.notices = prepare_prompt(
            prompt_ids, model.cfg.context_length, start_with_eot, settings.max_new_tokens,
            settings.leave_room, tokenizer_of(model))
        check_vocabulary(self.prompt_ids, model.cfg.vocab_size, tokenizer_of(model))
        if prefill is not None:
            if list(prefill.ids) != self.prompt_ids:
                raise ValueError("the prefill is of another prompt")
            if settings.capture_steps and prefill.step is None:
                raise ValueError("step capture needs a prefill with the last position's vectors")
        self.prefill = prefill
        self.ids: list[int] = list(self.prompt_ids)
        self.prompt_seconds: float | None = None
        self.stopped_by: str | None = None  # "eot", "max_new_tokens", "closed"
        self.cache: KVCache | None = None  # the keys and values so far (None once the window slid)
        self._iter = self._run()

    def __iter__(self) -> "GenerationStream":
        return self

    def __next__(self) -> Step:
        return next(self._iter)

    def close(self) -> None:
        if self.stopped_by is None:
            self.stopped_by = "closed"
        self._iter.close()

    def _run(self) -> Iterator[Step]:
        model, s = self.model, self.settings
        device = next(model.parameters()).device
        gen = sampler(s)
        tok = tokenizer_of(model)
        decoder = tok.decoder()
        self._static = graph_decode.wanted(model, device) and not s.recompute  # before our hooks
        self._decoder: graph_decode.StaticDecoder | None = None
        recorder = self._recorder = StepRecorder(model) if s.capture_steps else None
        start = time.perf_counter()
        with torch.inference_mode(), (recorder or contextlib.nullcontext()):
            first_capture = None
            if self.prefill is not None:  # the prompt pass already ran, captured
                prefill, self.prefill = self.prefill, None  # its cache grows: use it once
                cache, logits, first_capture = prefill.cache, prefill.logits, prefill.step
                self.cache = cache
                self.prompt_seconds = prefill.seconds
                start -= prefill.seconds  # elapsed counts the prompt pass, as without one
            else:
                cache = model.new_cache()
                prompt = torch.tensor([self.ids], device=device)
                logits = model(prompt, cache=cache, last_only=True)[0, -1]
                self.cache = cache
                self.prompt_seconds = time.perf_counter() - start
            last = time.perf_counter()
            for index in range(s.max_new_tokens):
                token = pick(logits, s, gen) if self.forced is None else self.forced[index]
                probs, top_ids, top_probs = most_likely(logits, s.show_top_k)
                now = time.perf_counter()
                step = Step(
                    index=index, position=len(self.ids), token_id=token,
                    piece=tok.token_piece(token), text=decoder.push(token),
                    prob=float(probs[token]),
                    top_ids=top_ids, top_probs=top_probs,
                    elapsed=now - start, step_seconds=now - last,
                    is_eot=token == tok.eot_id,
                    capture=(first_capture if index == 0 and first_capture is not None
                             else self._snapshot() if recorder else None),
                    logits=(logits.float().cpu().numpy()
                            if s.capture_steps else None),
                )
                self.ids.append(token)
                yield step
                if step.is_eot and s.stop_at_eot:
                    self.stopped_by = "eot"
                    return
                if index + 1 == s.max_new_tokens:
                    break
                last = time.perf_counter()
                logits = self._next(token)
        self.stopped_by = "max_new_tokens"

    def _next(self, token: int) -> torch.Tensor:
        """The logits after ``token``: a step over the cache (a static one where
        ``graph_decode`` says so, for at most ``graph_decode.MOST`` positions, then on
        with the same keys and values growing), or, once the context is full or with
        ``recompute``, the whole window again without a cache."""
        model, s, ctx = self.model, self.settings, self.model.cfg.context_length
        device = next(model.parameters()).device
        if s.recompute:  # the book's way: the whole (cropped) context, every step
            self.cache = None
        if self._static and self.cache is not None and self._decoder is None:
            self._static = False  # one static cache a run
            size = min(ctx, len(self.ids) + s.max_new_tokens, self.cache.length + graph_decode.MOST)
            if self.cache.length + 1 < size and graph_decode.fits(self.cache, size):
                self._decoder = graph_decode.StaticDecoder(model, self.cache, size, s.capture_steps)
                self.cache = self._decoder.cache
                if self._recorder is not None:
                    self._recorder.remove()  # the decoder records the steps
        if self._decoder is not None:
            if not self._decoder.full:
                return self._decoder.step(token)
            self.cache, self._decoder = self._decoder.cache.growing(), None
            if self._recorder is not None:
                self._recorder.__enter__()  # the later steps recorded as without it
        if self.cache is not None and self.cache.length < ctx:
            return model(torch.tensor([[token]], device=device), cache=self.cache,
                         last_only=True)[0, -1]
        self.cache = None  # context full: slide the window, recompute without a cache
        window = torch.tensor([self.ids[-ctx:]], device=device)
        return model(window, last_only=True)[0, -1]

    def _snapshot(self) -> StepCapture:
        source = self._decoder if self._decoder is not None else self._recorder
        return source.snapshot(len(self.ids) - 1)


def generate_stream(model: BlockModel, prompt_ids: list[int],
                    settings: GenerationSettings = GenerationSettings(),
                    start_with_eot: bool = False,
                    prefill: Prefill | None = None,
                    forced: list[int] | None = None) -> GenerationStream:
    """A stream of generated tokens; see ``GenerationStream``. With ``prefill`` (from
    passes.prompt_and_prefill) the prompt is not run again; with ``forced`` each step
    takes the next of these tokens (a saved run replayed) and reports its probability."""
    if forced is not None:
        settings = dataclasses.replace(settings, max_new_tokens=len(forced))
    return GenerationStream(model, prompt_ids, settings, start_with_eot, prefill, forced)



@dataclass
class GenerationResult:
    prompt_ids: list[int]
    steps: list[Step] = field(default_factory=list)

    @property
    def new_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]


def generate(model: BlockModel, prompt_ids: list[int],
             settings: GenerationSettings = GenerationSettings()) -> GenerationResult:
    """Run a stream to the end and collect its steps."""
    stream = generate_stream(model, prompt_ids, settings)
    return GenerationResult(stream.prompt_ids, list(stream))
