"""Predict, then reveal: multiple-choice questions about the node just selected, asked
before the learner sees it. Every answer and every feedback line is computed from the
shown pass's live tensors (their shapes, values and the node table), never from a
formula the model might not follow. Each node has questions of its own that rotate; the
block's first node asks the seeds' "which operation touches x first?" with the seeds'
distractors, and every wrong option says why it is wrong, with this model's numbers.

A question states what would give it away (``Question.facts``: kinds of thing and exact
texts); the window's cover service hides them until the answer. Numbers and shapes are
offered alike in form (question.numbers_around). Which questions a node gets is its kind's
record's (kinds.py); learn.py asks them. Qt-free."""

from __future__ import annotations

import random

import numpy as np

from ..gpt.nodes import (Width, ATTENTION, BLOCK_INPUT, FEED_FORWARD, FIRST_ADD, FIRST_DROPOUT,
                         FIRST_NORM, SPLIT_QUERIES, PATTERN, SECOND_NORM, Kind, as_order,
                         block_hook_name, block_input, block_steps, embeddings, eval_source,
                         input_node, node_for_hook, parse_hook, residual_branches, role, Role,
                         shortcut_sources)
from .facts import ORDER, SHAPES, VALUES
from .question import (NORM_WORDS, Live, Question, choices, live_layer, nth, numbers_around)
from ..gpt.config import NormPosition

__all__ = ["ORDER", "SHAPES", "VALUES", "Live", "Question", "shape_question", "width_question",
           "first_node_question"]


def _shape_reason(d: tuple, shape: tuple, c: int, hidden: int) -> str:
    """Why a shape is not this tensor's, in its own terms and this model's numbers."""
    if len(d) != len(shape):
        return f"{len(d)} dimensions; this tensor has {len(shape)}"
    if d == shape:
        return ""
    i = next(i for i, (a, b) in enumerate(zip(d, shape)) if a != b)
    role = {c: "emb_dim", hidden: "the feed-forward's hidden width", c // 4: "a quarter of emb_dim"}
    named = f" ({role[d[i]]})" if d[i] in role else ""
    return f"dimension {i} would be {d[i]}{named}; in this pass it is {shape[i]}"


def _emb(live: Live) -> int:
    stream = embeddings(live.norm_position)  # what enters block 0: emb_dim values a token
    return int(live.views[stream].shape[-1]) if stream in live.views else int(live.shape[-1])


def _width_gives(live: Live, last: int, c: int, hidden: int) -> tuple[str, ...]:
    """Texts that would give a width away: the width itself (not when it is the prompt's
    length, which the prompt shows by design) and, for the model's own widths, the other
    width and the factor between them (192 wide and × 4 make 768)."""
    if live.node.width == Width.CTX:  # one column per key: the prompt's length
        return ()
    gives = [str(last), f"{last:,}"]
    if last in (c, hidden) and hidden != c:
        ratio = f"{hidden / c:.3g}"  # as the feed-forward's frame says it: "4× wider inside"
        gives += [str(c), str(hidden), f"{hidden:,}", f"× {ratio}", f"{ratio} ×", f"{ratio}×"]
    return tuple(gives)


# ------------------------------------------------------------------ questions per node
def shape_question(live: Live, rng: random.Random) -> Question:
    """Options differ in the last dimension only, at a random rank among the four; a
    token tensor's (B, T, C) and a query × key table's come as a grid instead (see
    _grid)."""
    shape, node = live.shape, live.node
    c = _emb(live)
    hidden = live.width(role(live.norm_position, Role.ACTIVATION_INPUT), live_layer(live)) or 4 * c
    lead, last = shape[:-1], shape[-1]
    if node.width == Width.CTX:
        return _table_shape_question(live, rng, c)
    if node.width == Width.HEAD:
        h, hd = shape[1], shape[-1]
        meaningful = [h, c, 2 * hd]
        why = f"{c} values per token split among {h} heads: {c} / {h} = {hd} each"
    elif len(shape) == 2:  # the position embedding: one vector per position
        meaningful = [c // 4, 4 * c, c // 2]
        why = f"one {c}-value vector per position 0..{shape[0] - 1}, shared by every sample"
    else:
        source = live.input()
        meaningful = [c, hidden, c // 4, 2 * last] + ([int(source.shape[-1])] if source else [])
        why = (f"its input was {tuple(source.shape)}" if source is not None
               else "one vector per token")
        why += f"; each of the {int(np.prod(lead))} token vectors comes out with {last} values"
    question = f"What shape comes out of {node.label} ({live.name}) in this pass?"
    gives = _width_gives(live, last, c, hidden)
    # the seeds' (6, 768) beside (2, 3, 768), in a third of the draws: the answer always
    # keeps its dimensions, so a grid of them every time would say the answer's half
    if len(shape) == 3 and rng.random() < 1 / 3:
        (other,) = numbers_around(last, meaningful, rng, 1)
        b, t = shape[0], shape[1]
        flat = f"batch and tokens run together into {b * t} rows; the tensor keeps them apart"
        return _grid(question, f"{shape}: {why}.", gives, rng, {
            shape: "", (b, t, other): _shape_reason((b, t, other), shape, c, hidden),
            (b * t, last): f"{flat}, {shape}",
            (b * t, other): f"{flat}, and {_shape_reason((b, t, other), shape, c, hidden)}"})
    distractors = [lead + (w,) for w in numbers_around(last, meaningful, rng)]
    why_not = {str(d): _shape_reason(tuple(d), shape, c, hidden) for d in distractors}
    options, answer, reasons = choices(str(shape), [str(d) for d in distractors], rng, why_not)
    return Question(question, options, answer, f"{shape}: {why}.", reasons, gives=gives)


def _grid(question: str, explanation: str, gives: tuple, rng: random.Random,
          offered: dict[tuple, str]) -> Question:
    """Four shapes of a two-by-two grid — two choices, each made right or wrong — the
    answer first in ``offered``: every option is like two others and unlike one, so
    neither its form nor its likeness to the rest names it."""
    shapes = list(offered)
    options, answer, reasons = choices(str(shapes[0]), [str(d) for d in shapes[1:]], rng,
                                       {str(d): why for d, why in offered.items()})
    return Question(question, options, answer, explanation, reasons, gives=gives)


def _table_shape_question(live: Live, rng: random.Random, c: int) -> Question:
    """A query × key table's shape (scores, masked scores, pattern): one table per head
    or one for all (the mask's broadcast shape), T × T or another size — every option a
    square table of four dimensions."""
    shape, node = live.shape, live.node
    b, h, t = shape[0], shape[1], shape[-1]
    hd = c // h
    (w,) = numbers_around(t, [hd], rng, 1)  # head_dim when it falls on the drawn side
    one = 2 if h == 1 else 1  # a one-head model: two heads against its one
    size = (f"{w} × {w} is head_dim × head_dim, a weight's shape; the table is query × key, "
            f"{t} × {t}" if w == hd else f"{w} queries and keys; the prompt has {t} tokens")
    heads = (f"{one} heads; this model has one" if h == 1 else
             f"one table for all heads (the mask's broadcast shape); each of the {h} heads "
             "scores its own")
    what = "weights" if node.kind == Kind.PATTERN else "scores"
    why = f"one {shape[2]} × {t} table of {what} (query × key) per head, for each of {h} heads"
    return _grid(f"What shape comes out of {node.label} ({live.name}) in this pass?",
                 f"{shape}: {why}.", (str(shape),), rng,
                 {shape: "", (b, h, w, w): size, (b, one, t, t): heads,
                  (b, one, w, w): f"{heads}; and {size}"})


def width_question(live: Live, rng: random.Random) -> Question:
    node, last = live.node, live.shape[-1]
    source = live.input()
    c = _emb(live)
    hidden = live.width(role(live.norm_position, Role.ACTIVATION_INPUT), live_layer(live)) or 4 * c
    came_in = int(source.shape[-1]) if source is not None else None
    roles = {came_in: "what went in", c: "the embedding width (emb_dim)",
             hidden: "the feed-forward's hidden width", c // 4: "a quarter of emb_dim",
             2 * last: "twice this node's real width"}
    offered = numbers_around(last, [came_in, c, hidden, c // 4, 2 * last], rng)
    why_not = {str(v): f"{v} is {roles[v]}; this node gives {last} values per token"
               if v in roles else f"{v} values per token is not this node's output; it gives {last}"
               for v in offered}
    options, answer, reasons = choices(str(last), [str(v) for v in offered], rng, why_not)
    if came_in is None:
        change = ""
    elif came_in == last:
        change = f" — the same as went in ({came_in})"
    else:
        change = f" — it went in with {came_in}"
    return Question(f"How many values does each token have after {node.label} ({live.name})?",
                    options, answer, f"{last}{change}. {node.description}", reasons,
                    gives=_width_gives(live, last, c, hidden))


def first_node_question(live: Live, rng: random.Random) -> Question:
    """The seeds' question with the seeds' options: most people guess attention. Its
    numbers are the block's that x enters (at a block's output: the next block's)."""
    order = block_steps(live.norm_position)
    # the answers (norm1 Pre-LN, att Post-LN) neither the longest nor the shortest; a
    # block without dropout (Llama's) offers its second norm instead
    named = {n.key: f"{n.label} ({n.key})" for n in order}
    fourth = next(k for k in (FIRST_DROPOUT, SECOND_NORM, FIRST_ADD) if k in named)
    labels = {k: named[k] for k in (FIRST_NORM, ATTENTION, FEED_FORWARD, fourth)}
    if fourth == FIRST_DROPOUT:
        labels[FIRST_DROPOUT] = "Dropout on the shortcut (drop_shortcut)"
    first = order[0].key
    layer = live_layer(live)
    x = live.views.get(block_input(layer, live.norm_position))
    x_shape = tuple(x.shape) if x is not None else "(B, T, C)"
    att, norm1 = live.near(ATTENTION, layer), live.near(FIRST_NORM, layer)
    place = {n.key: i + 1 for i, n in enumerate(order)}
    why = {}
    for key, label in labels.items():
        n = place[key]
        if key == ATTENTION and first != ATTENTION:
            std = ""
            if x is not None and norm1 is not None and x.array is not None and norm1.array is not None:
                std = (f" (the last token's std {x.array.reshape(-1, x.shape[-1])[-1].std():.3g} in x, "
                       f"{norm1.array.reshape(-1, norm1.shape[-1])[-1].std():.3g} after norm1)")
            why[label] = (f"attention comes {nth(n)}: it receives norm1's output, x rescaled "
                          f"token by token{std}, not x itself.")
        elif key == FEED_FORWARD:
            hidden = live.width(role(live.norm_position, Role.ACTIVATION_INPUT), layer)
            widen = f"it widens each token to {hidden} values and back" if hidden else \
                "it widens each token and narrows it back"
            why[label] = f"the feed-forward comes {nth(n)}, after the first add; {widen}."
        elif key == FIRST_DROPOUT:
            why[label] = (f"drop_shortcut comes {nth(n)}: it acts on the attention's output "
                          f"{tuple(att.shape) if att is not None else ''}, and does nothing at inference.")
        elif key == FIRST_NORM and first != FIRST_NORM:
            after = order[n - 2].key  # the step it reads: the first add (Post-LN), attention
            why[label] = (f"in this {as_order(live.norm_position).position.title} block "
                          f"{label.split(' (')[0]} comes {nth(n)}, after {after}, not before "
                          "attention.")
        elif key == SECOND_NORM:
            why[label] = f"{label} comes {nth(n)}, after the first add, before the feed-forward."
    options, answer, why_t = choices(labels[first], [v for k, v in labels.items() if k != first],
                                     rng, why)
    kind = as_order(live.norm_position).position.title
    sequence = " → ".join(n.key for n in order)
    return Question(f"Which operation touches the block's input x {x_shape} first?", options,
                    answer, f"In this {kind} block the order is {sequence}.", why_t,
                    frozenset({ORDER}), gives=(*NORM_WORDS, sequence))


def norm_question(live: Live, rng: random.Random) -> Question:
    pre = as_order(live.norm_position).position == NormPosition.PRE
    # alike in form and length: each says the order of one half
    options = ("Pre-LN: norm first, then attention or feed-forward, then add",
               "Post-LN: attention or feed-forward, then add, then norm last")
    layer = live_layer(live)
    fed_name = input_node(block_hook_name(layer, FIRST_NORM), live.norm_position)
    fed = live.views.get(fed_name)
    fed_by = ("the block's input" if fed_name == block_input(layer, live.norm_position)
              else parse_hook(fed_name)[1])
    detail = f" ({tuple(fed.shape)})" if fed is not None else ""
    why = ("", "here LayerNorm 1 takes the block's input, before attention.") if pre else \
        ("here LayerNorm 1 takes the first add's output, after attention.", "")
    return Question("Is this model Pre-LN or Post-LN?", options, 0 if pre else 1,
                    f"In this model LayerNorm 1 reads {fed_by}{detail}. GPT-2 is Pre-LN; the "
                    "2017 Transformer was Post-LN.", why, frozenset({ORDER}), gives=NORM_WORDS)


def norm_axis_question(live: Live, rng: random.Random) -> Question:
    c = live.shape[-1]
    right = "each token's own features"  # alike in form: the count is in the explanation
    wrong = {"each feature over the whole batch": "that is BatchNorm; LayerNorm never looks at other samples.",
             "all tokens of the prompt together": "each token is normalised on its own, so its "
                                                   "neighbours do not change its scale.",
             "each attention head": "heads exist only inside attention; LayerNorm sees whole token vectors."}
    options, answer, why = choices(right, list(wrong), rng, wrong)
    source = live.input()
    numbers = ""
    if source is not None and source.array is not None and live.view.array is not None:
        before = source.array.reshape(-1, source.shape[-1])[-1]
        after = live.view.array.reshape(-1, c)[-1]
        numbers = (f" Here the last token went from mean {before.mean():.3g}, std {before.std():.3g} "
                   f"to mean {after.mean():.3g}, std {after.std():.3g} (then scale and shift).")
    return Question(f"Over which values does {live.node.label} compute its mean and variance?",
                    options, answer, f"Over {right} ({c} of them).{numbers}", why, frozenset({VALUES}))


def dropout_question(live: Live, rng: random.Random) -> Question:
    source = live.views.get(eval_source(live.name))  # what it outputs when it does nothing
    same = (source is not None and source.array is not None and live.view.array is not None
            and np.array_equal(source.array, live.view.array))
    nothing = "it changes nothing: its output equals its input"
    zeroes = "it zeroes a share drop_rate of the values and scales the rest up"
    why_not = {zeroes: "only in training mode; here its output equals its input, value for value",
               nothing: f"this model is in training mode: {100 * live.view.stats.frac_zero:.0f}% "
                        "of the output is zero",
               "it halves every value": "dropout never halves: it zeroes some values and "
                                        "scales the rest up by 1/(1 − drop_rate)",
               "it removes whole tokens": f"the shape stays {live.shape}: every token is still there"}
    options, answer, reasons = choices(nothing if same else zeroes,
                                        [zeroes if same else nothing, "it halves every value",
                                         "it removes whole tokens"], rng, why_not)
    share = f"{100 * live.view.stats.frac_zero:.0f}%" if live.view.stats.ready else "some"
    explanation = ("The model runs in eval mode here: the output is the same tensor as its input, "
                   "value for value. In training it zeroes a random share and scales the rest, "
                   "which keeps the model from leaning on single values (overfitting)."
                   if same else f"This model is in training mode: {share} of the values are zero.")
    return Question(f"What does {live.node.label} ({live.name}) change while the model generates?",
                    options, answer, explanation, reasons, hides=frozenset({VALUES}))


def shortcut_question(live: Live, rng: random.Random) -> Question:
    # the answers (x, add1, norm1) neither the longest nor the shortest, each with its name
    norm = node_for_hook(block_hook_name(0, FIRST_NORM), live.norm_position).label
    names = {BLOCK_INPUT: "the stream into the block (x)", FIRST_ADD: f"the first add's output ({FIRST_ADD})",
             FIRST_NORM: f"{norm}'s output ({FIRST_NORM})"}
    source = shortcut_sources(live.norm_position)[parse_hook(live.name)[1]]
    right = names[source]
    distractors = [v for k, v in names.items() if k != source] + ["the attention's output (att)"]
    order = as_order(live.norm_position).position.title
    why_not = {v: f"in this {order} block the shortcut into {parse_hook(live.name)[1]} carries "
                  f"{right}; {v} is {'the branch being added' if ATTENTION in v else 'another point of the stream'}"
               for v in distractors}
    options, answer, reasons = choices(right, distractors, rng, why_not)
    branch = live.near(residual_branches(live.norm_position)[parse_hook(live.name)[1]])
    detail = ""
    if branch is not None and branch.array is not None and live.view.array is not None:
        total = live.view.array.reshape(-1, live.shape[-1])[-1]
        b = branch.array.reshape(-1, live.shape[-1])[-1]
        detail = (f" For the last token the branch's norm is {np.linalg.norm(b):.3g} and the "
                  f"shortcut's {np.linalg.norm(total - b):.3g}; the shape stays {live.shape}.")
    return Question(f"Which tensor does the shortcut carry into {live.node.label} ({live.name})?",
                    options, answer, f"{right[0].upper()}{right[1:]}.{detail}", reasons,
                    hides=frozenset({ORDER, VALUES}), gives=NORM_WORDS)


def pattern_rows_question(live: Live, rng: random.Random) -> Question:
    array = live.view.array
    sums = array.sum(axis=-1) if array is not None else np.ones(1)
    right = "1" if np.allclose(sums, 1, atol=1e-3) else f"{float(sums.mean()):.3g}"
    t = live.shape[-1]
    uniform = f"1/{t}"  # all options numbers: none stands out by its form
    why_not = {"0": "softmax weights are positive and each row's add up to 1",
               str(t): f"{t} is the number of keys, not the sum of their weights",
               uniform: f"1/{t} is one key's weight when a row is spread evenly over all "
                        f"{t} keys, not the row's sum", "1": "here the rows do not sum to 1"}
    options, answer, reasons = choices(right, ["0", str(t), uniform], rng, why_not)
    zeros = float((array == 0).mean()) if array is not None else 0.0
    return Question("What does each row of the attention pattern add up to?", options, answer,
                    f"Each row is a softmax over the keys, so it sums to {right} (here between "
                    f"{sums.min():.6f} and {sums.max():.6f}); {100 * zeros:.1f}% of the weights "
                    "are exactly zero: the causal mask hides every later token.", reasons,
                    hides=frozenset({VALUES}), gives=(f"sums to {right}", f"sum to {right}",
                                                      f"sum {right}"))


def _heads(live: Live) -> tuple[int, int, int]:
    """(n_heads, head_dim, emb_dim) of the node's block, from the pass's shapes."""
    queries = live.near(SPLIT_QUERIES)
    heads = queries or live.near(PATTERN)
    h = int(heads.shape[1]) if heads is not None else 1
    c = _emb(live)
    return h, int(queries.shape[-1]) if queries is not None else c // h, c  # Qwen3: its own


def head_dim_question(live: Live, rng: random.Random) -> Question:
    h, hd, c = _heads(live)
    roles = {h: "the number of heads", c: "the whole token's width (emb_dim)",
             2 * hd: "twice a head's width", c * h: "emb_dim times the heads: heads do not copy the token"}
    offered = numbers_around(hd, list(roles), rng)
    why_not = {str(v): f"{v} is {roles[v]}; each head gets {hd}" if v in roles
               else f"each head gets {hd} values, not {v}" for v in offered}
    options, answer, reasons = choices(str(hd), [str(v) for v in offered], rng, why_not)
    split = (f"head_dim = emb_dim / n_heads = {c} / {h} = {hd}: the token's {c} values are "
             f"divided among the {h} heads." if h * hd == c else f"head_dim is the model's own "
             f"{hd} (Qwen3 sets it): {h} heads × {hd} = {h * hd} values, against emb_dim {c}.")
    return Question(f"How many values per token does each head work on in {live.node.label} "
                    f"({live.name})?", options, answer, split, reasons, frozenset({SHAPES}),
                    gives=(str(hd), f"{hd} each", f"= {hd}"))


def scaling_question(live: Live, rng: random.Random) -> Question:
    """What the scores are divided by, in symbols: the options name no width, so they
    neither rank the answer nor answer the head-width question for it."""
    h, hd, c = _heads(live)
    right = "√head_dim"
    wrong = {"head_dim": "dividing by head_dim itself would shrink the scores far too much",
             "√(n_heads · head_dim)": "that is √emb_dim, the whole token's width; each head's "
                                      "dot product runs over head_dim values only",
             "n_heads": "the number of heads does not change one head's dot product"}
    options, answer, reasons = choices(right, list(wrong), rng, wrong)
    return Question("Before the softmax, what are these scores divided by?", options, answer,
                    f"By √head_dim = √{hd} ≈ {hd ** 0.5:.3g} here: a dot product of {hd} values "
                    f"has a spread that grows like √{hd}; dividing keeps the softmax from "
                    "saturating. The book does it inside torch.softmax(attn_scores / "
                    "keys.shape[-1] ** 0.5).", reasons, frozenset({VALUES}))


def mask_question(live: Live, rng: random.Random) -> Question:
    # the four of one grid (later / earlier × −inf / zero): no option is the one most
    # like the others
    right = "sets each score of a later key to −inf"
    zero = "a score of zero still gets a share after softmax (e⁰ = 1); only −inf gives 0"
    earlier = "earlier keys are what a token may read; the mask hides the later ones"
    wrong = {"sets each score of a later key to zero": zero,
             "sets each score of an earlier key to zero": f"{earlier}; and {zero}",
             "sets each score of an earlier key to −inf": earlier}
    options, answer, reasons = choices(right, list(wrong), rng, wrong)
    array = live.view.array
    detail = ""
    if array is not None:
        row = array[0, 0, -1]
        first = array[0, 0, 0]
        detail = (f" Here the first query keeps {int(np.isfinite(first).sum())} of its "
                  f"{first.size} scores and the last {int(np.isfinite(row).sum())}.")
    return Question(f"What does the causal mask do in {live.node.label} ({live.name})?",
                    options, answer, f"It {right}, so that softmax gives it weight 0.{detail}",
                    reasons, frozenset({VALUES}))


def gelu_question(live: Live, rng: random.Random) -> Question:
    source = live.input()
    x = source.real_rows() if source is not None and source.array is not None else None
    share = float((x < 0).mean()) if x is not None else 0.5
    buckets = ["under 25%", "25–50%", "50–75%", "over 75%"]
    right = buckets[min(3, int(share * 4))]
    why_not = {b: f"{100 * share:.1f}% are negative in this pass" for b in buckets}
    options, answer, reasons = choices(right, [b for b in buckets if b != right], rng, why_not)
    return Question("What share of this GELU's inputs are negative in this pass?", options, answer,
                    f"{100 * share:.1f}% of the {0 if x is None else x.size:,} inputs are negative; "
                    "GELU squashes them to between -0.17 and 0 while positive ones pass almost "
                    "unchanged.", reasons, hides=frozenset({VALUES}))
