"""Where a model's parameter count comes from: the count per component (embeddings,
attention, feed-forward, norms, output head) from the config, with the output head tied
to the token embedding (GPT-2's way) and untied (the book's GPTModel), the memory each
takes, and how the figures in the literature relate to the exact count — the GPT-2
paper's 117M / 345M / 762M / 1542M, OpenAI's released checkpoints 124M / 355M / 774M /
1558M, and the book's 163,009,536 (qkv_bias off, head untied) and its 621.83 MB.
Each family counts its own parameters (``BlockFamily.counting``); no model is built, and
nothing here needs torch. Qt-free; the Model view and ``gpt-explorer info`` print it."""

from __future__ import annotations

from dataclasses import dataclass

from .config import BOOK_GPT_CONFIG_124M, PRESETS, GPTConfig
from .counts import ParameterCounts, Row

# (the name of OpenAI's released checkpoint, the GPT-2 paper's table) per preset
LITERATURE = {"gpt2-small": ("124M", "117M"), "gpt2-medium": ("355M", "345M"),
              "gpt2-large": ("774M", "762M"), "gpt2-xl": ("1558M", "1542M")}
MB = 2 ** 20  # the book's "MB": 163,009,536 x 4 bytes = 621.83 MB
# presets whose published model has fewer token rows than GPT-2's tokenizer needs: the
# preset keeps GPT-2's 50,257 (it reads with that tokenizer), said wherever its size is
PUBLISHED_VOCAB = {"smollm2-135m": ("SmolLM2-135M", 49152)}


def count_parameters(cfg: GPTConfig) -> ParameterCounts:
    """Parameter counts per component, from the config alone (no model is built)."""
    return cfg.family.counting.count(cfg)


def kv_cache_bytes(cfg: GPTConfig, tokens: int, bytes_per_value: int = 4) -> int:
    """What a KV cache of ``tokens`` tokens holds: in every block a key and a value for
    each key/value head (fewer than the query heads under grouped-query attention)."""
    return 2 * cfg.n_layers * cfg.kv_heads * cfg.head_dim * tokens * bytes_per_value


def describe_size(cfg: GPTConfig) -> str:
    """The model's shape in one line, from its config: '12 blocks · 768 wide · 12 heads ·
    124.4M parameters', and what the family adds (' · Post-LN', ' · Llama block')."""
    n = count_parameters(cfg).total
    count = f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n:,}"
    heads = f"{cfg.n_heads} heads"
    heads += f" ({cfg.kv_heads} key/value)" if cfg.kv_heads != cfg.n_heads else ""
    published = PUBLISHED_VOCAB.get(sizes(cfg).preset or "")
    vocab = (f" · GPT-2's {cfg.vocab_size:,} token rows ({published[0]}'s are {published[1]:,})"
             if published else "")
    return (f"{cfg.n_layers} blocks · {cfg.emb_dim} wide · {heads} · "
            f"{count} parameters{cfg.family.words.size_note(cfg)}{vocab}")


@dataclass(frozen=True)
class Sizes:
    config: GPTConfig
    rows: tuple[Row, ...]
    tied: int  # output head shares tok_emb's weight
    untied: int  # output head is a matrix of its own
    preset: str | None  # the preset with this shape, if any

    def megabytes(self, count: int, bytes_per_value: int = 4) -> float:
        return count * bytes_per_value / MB

    def notes(self) -> list[str]:
        """Lines that say what each figure counts (with this model's numbers)."""
        cfg, lines = self.config, []
        head = cfg.vocab_size * cfg.emb_dim
        if cfg.tie_weights:
            lines.append(f"Tied head (this model): out_head uses tok_emb's {cfg.vocab_size:,} × "
                         f"{cfg.emb_dim:,} matrix, so {head:,} parameters are counted once: "
                         f"{self.tied:,} in all. Untied (a head of its own) it would have "
                         f"{self.untied:,}.")
        else:
            lines.append(f"Untied head (this model): out_head is a {cfg.vocab_size:,} × "
                         f"{cfg.emb_dim:,} matrix of its own, {head:,} parameters more: "
                         f"{self.untied:,} in all. Tied to tok_emb (as GPT-2's) it would have "
                         f"{self.tied:,}.")
        if cfg.n_experts:  # a mixture: a token's forward uses k of the experts
            per_expert = 3 * cfg.emb_dim * cfg.hidden_dim
            idle = cfg.n_layers * (cfg.n_experts - cfg.experts_per_token) * per_expert
            total = count_parameters(cfg).total
            lines.append(f"Active per token: {total - idle:,} of {total:,}. Each block's "
                         f"router sends a token to {cfg.experts_per_token} of its "
                         f"{cfg.n_experts} experts ({per_expert:,} parameters each); the other "
                         f"{cfg.n_experts - cfg.experts_per_token} do not run for it.")
        book_untied = count_parameters(BOOK_GPT_CONFIG_124M.replace(tie_weights=False)).total
        book_tied = count_parameters(BOOK_GPT_CONFIG_124M.replace(tie_weights=True)).total
        # GPT-2 as released: biased W_query/W_key/W_value and a tied head, whatever this
        # model's own bias and head (a book state dict has neither)
        gpt2 = count_parameters(PRESETS[self.preset]).total if self.preset in LITERATURE else None
        if self.preset == "gpt2-small":
            lines.append(
                f"The book's {book_untied:,} is its GPT_CONFIG_124M, against GPT-2's "
                f"{gpt2:,}: no bias in W_query/W_key/W_value (qkv_bias False: "
                f"{gpt2 - book_tied:,} fewer, {book_tied:,}) and the head untied "
                f"({book_untied - book_tied:,} more: {cfg.vocab_size:,} × {cfg.emb_dim:,}); "
                f"{book_untied:,} × 4 bytes = {book_untied * 4 / MB:.2f} MB in float32.")
        if self.preset in PUBLISHED_VOCAB:
            name, rows = PUBLISHED_VOCAB[self.preset]
            real = count_parameters(cfg.replace(vocab_size=rows)).total
            lines.append(f"{name} has {rows:,} token rows and {real:,} parameters; this preset "
                         f"keeps GPT-2's {cfg.vocab_size:,} rows, as it reads with GPT-2's "
                         f"tokenizer: {count_parameters(cfg).total:,}.")
        if self.preset in LITERATURE:
            released, paper = LITERATURE[self.preset]
            lines.append(f"OpenAI's checkpoint is called {released}: GPT-2's tied count with "
                         f"the qkv biases, {gpt2:,}, rounded ({gpt2 / 1e6:.0f}M)" +
                         ("." if self.tied == gpt2 else
                          f"; this model's own tied count is {self.tied:,}."))
            gap = gpt2 - float(paper[:-1]) * 1e6
            same = [r.component for r in self.rows if abs(r.count - gap) < 0.5e6]
            because = (f"the difference is about the size of the {same[0]}" if same else
                       "no component of the model accounts for the difference; OpenAI's "
                       "released checkpoints carry the exact count")
            lines.append(f"The GPT-2 paper's table says {paper} ({gap / 1e6:.1f}M fewer); "
                         f"{because}.")
        return lines


def sizes(cfg: GPTConfig) -> Sizes:
    counts = count_parameters(cfg)
    head = count_parameters(cfg.replace(tie_weights=False)).head
    head_row = Row("output head (out_head)" + (": tied, counted in tok_emb" if cfg.tie_weights
                                               else ""), counts.head if not cfg.tie_weights else 0,
                   None)
    rows = cfg.family.counting.rows(cfg, counts) + (head_row,)
    # the sizes that set the count: a Post-LN gpt2-small has gpt2-small's parameters
    ignored = ("qkv_bias", "tie_weights", "drop_rate", "norm_position")
    shape = {k: v for k, v in cfg.to_dict().items() if k not in ignored}
    name = next((n for n, p in PRESETS.items() if p.family is cfg.family
                 and {k: v for k, v in p.to_dict().items() if k not in ignored} == shape), None)
    tied = count_parameters(cfg.replace(tie_weights=True)).total
    return Sizes(cfg, rows, tied, tied + head, name)


@dataclass(frozen=True)
class FeedForwardCost:
    factor: int  # hidden width = factor × emb_dim
    hidden: int
    parameters: int  # per block: the Linears' weights (and GPT-2's biases)
    multiply_adds: int  # per token and block: emb × hidden for each matrix
    model_parameters: int  # the whole model (tied head) with this width


def feed_forward_cost(cfg: GPTConfig, factor: int) -> FeedForwardCost:
    """What the feed-forward's width costs (the book's 4 * emb_dim is a choice: capacity
    against parameters and compute): per block and token, and the whole model's count.
    The family says how many matrices it has (a SwiGLU's three: fc1, fc2, fc3) and
    whether they have biases."""
    if factor < 1:
        raise ValueError("the width factor must be at least 1")
    hidden = factor * cfg.emb_dim
    matrices = cfg.family.counting.ff_matrices
    biases = hidden + cfg.emb_dim if cfg.family.counting.ff_biases else 0
    per_block = matrices * cfg.emb_dim * hidden + biases
    now = count_parameters(cfg.replace(tie_weights=True))
    total = now.total - now.feed_forward + per_block * cfg.n_layers
    return FeedForwardCost(factor, hidden, per_block, matrices * cfg.emb_dim * hidden, total)
