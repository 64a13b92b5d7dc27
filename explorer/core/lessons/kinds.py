"""Every kind of node as one record, keyed by ``Kind``: what it does and the common
mistake about it (Explain; texts with {names} filled in from the loaded config), its Learn
questions, the worker that works its formula out with one token's numbers, and the class
whose own source the Code view shows for it. A new kind is one record here, its
histogram range beside the node table (core/gpt/node_types.py: capture bins by it, below
the lessons) and its model code; tests/core/gpt/test_nodes.py names what a kind lacks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..gpt.layers import GELU, LayerNorm
from ..gpt.norms import DyT, RMSNorm
from ..gpt.node_types import Kind
from . import formulas_gpt2 as gpt2
from . import formulas_llama as llama
from . import formulas_moe as moe
from . import formulas_common as common
from .formulas_common import Ask, Worked
from .quiz import (dropout_question, gelu_question, head_dim_question, mask_question,
                   norm_axis_question, pattern_rows_question, scaling_question, shape_question,
                   shortcut_question, width_question)
from .quiz_moe import experts_question
from .quiz_llama import (gate_share_question, rms_mean_question, rms_size_question,
                         rope_angle_question, rope_shift_question, swiglu_weights_question)


@dataclass(frozen=True)
class KindLesson:
    what: str  # what a node of this kind does, in words
    mistake: str  # the common mistake about it
    questions: tuple[Callable, ...]  # Learn's questions that fit it; they rotate
    formula: Callable[[Ask], Worked]  # its formula worked with one token's numbers
    own_class: type | None = None  # the class the Code view shows (else the node's line)


KIND_LESSONS: dict[Kind, KindLesson] = {
    Kind.EMBEDDING: KindLesson(
        what="Turns each token id (or each position) into a vector of {c} learned numbers. "
             "Nothing is computed yet: it is a table lookup ({vocab} token rows, {ctx} "
             "position rows).",
        mistake="The position embedding is added, not concatenated: the width stays {c}.",
        questions=(shape_question, width_question),
        formula=gpt2.embedding),
    Kind.NORM: KindLesson(
        what="Rescales every token's vector on its own: subtract its mean, divide by its "
             "standard deviation, then apply a learned scale and shift per dimension. Like "
             "marks from subjects graded on different scales, put on one scale before they "
             "are compared: no feature can drown out the others by its size alone.",
        mistake="LayerNorm normalises each token over its own {c} features, not over the batch "
                "(that is BatchNorm); it uses the biased variance (divide by n).",
        questions=(norm_axis_question, shape_question),
        formula=gpt2.layer_norm,
        own_class=LayerNorm),
    Kind.ATTENTION: KindLesson(
        what="Lets each token look at the tokens before it: queries meet keys to give "
             "weights, and each token receives a weighted mix of the values, one mix per "
             "head ({heads} heads of {head_dim} values); out_proj then combines the heads.",
        mistake="The causal mask makes later tokens invisible to earlier ones; the output "
                "has the same shape as the input ({c} values per token).",
        questions=(shape_question, width_question),
        formula=gpt2.attention),
    Kind.HEADS: KindLesson(
        what="Splits each token's {c} values into {heads} heads of {head_dim} (view, then "
             "transpose(1, 2)), so that each head compares tokens on its own {head_dim} "
             "values; no number changes, only where it sits.",
        mistake="Heads are not separate copies of the token: the {c} values are divided "
                "among them ({heads} × {head_dim} = {c}), each head gets its own slice.",
        questions=(head_dim_question, shape_question),
        formula=gpt2.inside),
    Kind.SCORES: KindLesson(
        what="The dot product of every query with every key, per head: how well token "
             "(row) and token (column) match. Large means a strong match; the scores are "
             "raw numbers, not yet weights.",
        mistake="The scores are divided by √head_dim (√{head_dim}) only inside the softmax, "
                "after the mask: what is stored here is the plain dot product.",
        questions=(shape_question, scaling_question),
        formula=gpt2.inside),
    Kind.MASK: KindLesson(
        what="The causal mask: every score of a key after its query becomes −inf, so that "
             "softmax gives it weight 0 and no token can read the tokens that follow it.",
        mistake="The mask sets later keys to −inf, not 0: a score of 0 would still get a share "
                "of the weight after softmax.",
        questions=(mask_question, shape_question),
        formula=gpt2.inside),
    Kind.CONTEXT: KindLesson(
        what="Each query's weighted mix of the value vectors, per head: the attention "
             "weights of its row times the values of the keys ({head_dim} values per head).",
        mistake="The mix is over keys (earlier tokens), per head; it is not yet the "
                "attention's output: the heads are joined and go through out_proj first.",
        questions=(shape_question, head_dim_question),
        formula=gpt2.inside),
    Kind.PATTERN: KindLesson(
        what="The attention weights themselves: for every head, how much each token (row) "
             "takes from each earlier token (column). Each row sums to 1.",
        mistake="Rows, not columns, sum to 1; the upper triangle is zero because of the mask.",
        questions=(shape_question, pattern_rows_question),
        formula=gpt2.attention),
    Kind.DROPOUT: KindLesson(
        what="During training, zeroes a random share ({drop}) of the values and scales the "
             "rest up so the expected value stays the same. It keeps the model from leaning "
             "on a few values, against overfitting; when the model is used (eval mode) it "
             "does nothing (the Divergence tab's dropout-on change shows the difference).",
        mistake="Dropout is not applied when generating (eval mode): seeing values change "
                "here would mean the model was left in training mode.",
        questions=(dropout_question, shape_question),
        formula=gpt2.eval_copy),
    Kind.ADD: KindLesson(
        what="The residual connection: adds the block's branch to the shortcut — the vector "
             "that skipped the branch — so information and gradients can pass around it.",
        mistake="The shortcut is added, not concatenated: the shape does not change — which "
                "is what lets blocks stack: each block gives back a tensor of the shape it was "
                "given, so the next block reads it as this one read its input.",
        questions=(shortcut_question, shape_question),
        formula=gpt2.add),
    Kind.LINEAR: KindLesson(
        what="A learned matrix multiplication applied to every token separately: each output "
             "value is a weighted score of all the token's input values (plus a bias where the "
             "layer has one), one "
             "set of weights per output value.",
        mistake="The weight is stored as (out, in) and applied as x @ W.T.",
        questions=(width_question, shape_question),
        formula=gpt2.linear),
    Kind.GELU: KindLesson(
        what="A smooth non-linearity: passes positive values almost unchanged, squashes "
             "negative ones towards zero with a small dip near -0.75. Without it the two "
             "Linear layers around it would collapse into one linear map (the Divergence "
             "tab's no-activation change shows it with this model's weights).",
        mistake="GELU is not ReLU: negative inputs give small negative outputs, not zeros — "
                "and a gradient that is not 0 there, so a neuron whose input went negative can "
                "still learn (a non-linearity must give a useful gradient, not only a bend).",
        questions=(gelu_question, shape_question),
        formula=gpt2.gelu,
        own_class=GELU),
    Kind.FFN: KindLesson(
        what="The feed-forward block: widen each token from {c} to {hidden} values, apply GELU, "
             "and narrow it back to {c}. It works on each token on its own.",
        mistake="The feed-forward block does not change the embedding size: {c} in, {c} out, "
                "only {hidden} inside. Its forward does nothing special for that: the shapes "
                "come from the two Linear layers' sizes alone ({c} → {hidden}, {hidden} → {c}).",
        questions=(width_question, shape_question),
        formula=gpt2.eval_copy),
    Kind.LOGITS: KindLesson(
        what="Scores every token of the vocabulary ({vocab} of them) as the next token; "
             "softmax turns the scores into probabilities.",
        mistake="These are not probabilities yet: softmax is applied afterwards.",
        questions=(width_question, shape_question),
        formula=gpt2.logits),
    Kind.DYT: KindLesson(
        what="Dynamic Tanh, where a norm would be: each value squashed on its own, γ · "
             "tanh(α · x) + β, with α one learned number and γ, β a norm's {c} weights each. "
             "It takes no mean and no spread of the token: large values saturate near ±γ "
             "instead of being divided down.",
        mistake="DyT is not a norm: it does not make each token's values mean 0 and spread 1; "
                "a token twice as large comes out nearly the same only where tanh saturates.",
        questions=(shape_question,),
        formula=common.dyt,
        own_class=DyT),
    Kind.SCALE: KindLesson(
        what="Multiplies every value by one constant, √{c}: the token embeddings scaled up "
             "before the first block, so that they are not small beside what the blocks add "
             "to the stream. Nothing is learned here.",
        mistake="The scale is a fixed number, not a weight: it is √emb_dim (computed in the "
                "weights' dtype), the same for every token and every feature.",
        questions=(shape_question, width_question),
        formula=llama.embedding_scale),
    Kind.ROUTING: KindLesson(
        what="Each token's weight on each of the {experts} experts: the router's logits "
             "through a softmax, the {k} largest kept and every other expert set to 0. Only "
             "the kept experts run for that token, and its output is their outputs weighted "
             "by these numbers.",
        mistake="The weights are not the softmax over all experts: the experts left out get "
                "0, and unless the model renormalises, the kept weights sum to less than 1.",
        questions=(experts_question, shape_question, width_question),
        formula=moe.routing),
    Kind.RMSNORM: KindLesson(
        what="Rescales every token's vector on its own by its root mean square: divide by "
             "√(mean(x²) + eps), then multiply by a learned weight per dimension. Unlike "
             "LayerNorm it subtracts no mean and adds no shift: cheaper, and the direction "
             "of the vector is kept.",
        mistake="RMSNorm is not LayerNorm without eps: it never subtracts the mean, so a "
                "vector whose values are all 5 stays all 1 × weight, not 0; and it has no shift.",
        questions=(rms_mean_question, rms_size_question, shape_question),
        formula=llama.rms_norm,
        own_class=RMSNorm),
    Kind.ROPE: KindLesson(
        what="Rotary position embedding: each pair of a head's values (i and i + {half}) is "
             "rotated by the angle position · θᵢ, θᵢ = {base}^(−2i/{head_dim}){scaling}. "
             "Queries and keys "
             "are rotated by their own positions, so the score of two tokens depends on how far "
             "apart they are, not on where they stand; nothing is added to the embeddings.",
        mistake="RoPE does not add a position vector: it rotates queries and keys (never the "
                "values), and only their dot products see the positions.",
        questions=(rope_angle_question, rope_shift_question, shape_question),
        formula=llama.attention_step),
    Kind.SILU: KindLesson(
        what="SiLU (also called swish): x · σ(x). Like GELU it passes positive values almost "
             "unchanged and squashes negative ones towards 0 with a small dip (−0.28 at −1.28); "
             "here it turns fc1's values into a gate.",
        mistake="SiLU is not a 0/1 gate: negative inputs give small negative outputs, and large "
                "ones pass almost unchanged — with a gradient that is not 0 for negative inputs, "
                "so a closed gate can still learn to open (a non-linearity must give a useful "
                "gradient, not only a bend).",
        questions=(gate_share_question, shape_question),
        formula=llama.gate),
    Kind.PRODUCT: KindLesson(
        what="The gate at work: SiLU(fc1·x) times fc2·x, value by value ({hidden} of them). "
             "Where the gate is near 0 the value is shut off, where it is large the value "
             "passes; fc3 then brings the {hidden} values back to {c}.",
        mistake="The product is value by value (⊙), not a matrix product: fc1 and fc2 each "
                "widen to {hidden}, and the width stays {hidden} until fc3.",
        questions=(swiglu_weights_question, width_question, shape_question),
        formula=llama.gate),
}
