"""An independent transcription of the book's bonus-chapter Llama 3.2 model ("Converting
GPT to Llama": compute_rope_params, apply_rope, GroupedQueryAttention, FeedForward,
TransformerBlock, Llama3Model), with Qwen3's per-head RMSNorm of queries and keys as a
switch, written out here as a reader types it — the oracle our LlamaModel is checked
against, next to transformers."""

from __future__ import annotations

import torch
import torch.nn as nn


def compute_rope_params(head_dim, theta_base=10_000, context_length=4096, freq_config=None):
    assert head_dim % 2 == 0, "Embedding dimension must be even"
    inv_freq = 1.0 / (theta_base ** (torch.arange(0, head_dim, 2)[: (head_dim // 2)].float() / head_dim))
    if freq_config is not None:
        low_freq_wavelen = freq_config["original_context_length"] / freq_config["low_freq_factor"]
        high_freq_wavelen = freq_config["original_context_length"] / freq_config["high_freq_factor"]
        wavelen = 2 * torch.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / freq_config["factor"], inv_freq)
        smooth_factor = ((freq_config["original_context_length"] / wavelen - freq_config["low_freq_factor"])
                         / (freq_config["high_freq_factor"] - freq_config["low_freq_factor"]))
        smoothed_inv_freq = (1 - smooth_factor) * (inv_freq / freq_config["factor"]) + smooth_factor * inv_freq
        is_medium_freq = (wavelen <= low_freq_wavelen) & (wavelen >= high_freq_wavelen)
        inv_freq = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    positions = torch.arange(context_length)
    angles = positions[:, None] * inv_freq[None, :]  # (context_length, head_dim // 2)
    angles = torch.cat([angles, angles], dim=1)  # (context_length, head_dim)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin):
    batch_size, num_heads, seq_len, head_dim = x.shape
    x1 = x[..., : head_dim // 2]
    x2 = x[..., head_dim // 2:]
    cos = cos[:seq_len, :].unsqueeze(0).unsqueeze(0)
    sin = sin[:seq_len, :].unsqueeze(0).unsqueeze(0)
    rotated = torch.cat((-x2, x1), dim=-1)
    return ((x * cos) + (rotated * sin)).to(dtype=x.dtype)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_in, num_heads, num_kv_groups, head_dim, qk_norm=False, qkv_bias=False):
        super().__init__()
        self.num_heads, self.num_kv_groups = num_heads, num_kv_groups
        self.group_size = num_heads // num_kv_groups
        self.head_dim = head_dim
        self.d_out = num_heads * head_dim
        self.W_query = nn.Linear(d_in, self.d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_groups * head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(self.d_out, d_in, bias=False)
        self.q_norm = nn.RMSNorm(head_dim, eps=1e-6) if qk_norm else None
        self.k_norm = nn.RMSNorm(head_dim, eps=1e-6) if qk_norm else None

    def forward(self, x, mask, cos, sin):
        b, num_tokens, _ = x.shape
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        if self.q_norm is not None:
            queries, keys = self.q_norm(queries), self.k_norm(keys)
        keys = apply_rope(keys, cos, sin)
        queries = apply_rope(queries, cos, sin)
        keys = keys.repeat_interleave(self.group_size, dim=1)
        values = values.repeat_interleave(self.group_size, dim=1)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores = attn_scores.masked_fill(mask[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.reshape(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


class FeedForward(nn.Module):
    def __init__(self, emb_dim, hidden_dim):
        super().__init__()
        self.fc1 = nn.Linear(emb_dim, hidden_dim, bias=False)
        self.fc2 = nn.Linear(emb_dim, hidden_dim, bias=False)
        self.fc3 = nn.Linear(hidden_dim, emb_dim, bias=False)

    def forward(self, x):
        return self.fc3(nn.functional.silu(self.fc1(x)) * self.fc2(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = GroupedQueryAttention(cfg["emb_dim"], cfg["n_heads"], cfg["n_kv_groups"],
                                         cfg["head_dim"], cfg.get("qk_norm", False),
                                         cfg.get("qkv_bias", False))
        self.ff = FeedForward(cfg["emb_dim"], cfg["hidden_dim"])
        self.norm1 = nn.RMSNorm(cfg["emb_dim"], eps=cfg["eps"])
        self.norm2 = nn.RMSNorm(cfg["emb_dim"], eps=cfg["eps"])

    def forward(self, x, mask, cos, sin):
        shortcut = x
        x = self.att(self.norm1(x), mask, cos, sin)
        x = x + shortcut
        shortcut = x
        x = self.ff(self.norm2(x))
        return x + shortcut


class Llama3Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.trf_blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = nn.RMSNorm(cfg["emb_dim"], eps=cfg["eps"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)
        cos, sin = compute_rope_params(cfg["head_dim"], cfg["rope_base"], cfg["context_length"],
                                       cfg.get("rope_freq"))
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.triu(torch.ones(cfg["context_length"], cfg["context_length"], dtype=torch.bool), 1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, in_idx):
        x = self.tok_emb(in_idx)
        for block in self.trf_blocks:
            x = block(x, self.mask, self.cos, self.sin)
        return self.out_head(self.final_norm(x))


def book_config(cfg) -> dict:
    """The book's config dict for one of our GPTConfigs of the Llama family."""
    scaling = cfg.rope_scaling
    return {"vocab_size": cfg.vocab_size, "context_length": cfg.context_length,
            "emb_dim": cfg.emb_dim, "n_heads": cfg.n_heads, "n_layers": cfg.n_layers,
            "hidden_dim": cfg.hidden_dim, "n_kv_groups": cfg.kv_heads, "head_dim": cfg.head_dim,
            "rope_base": cfg.rope_base, "qk_norm": cfg.qk_norm, "qkv_bias": cfg.qkv_bias,
            "eps": cfg.norm_eps,
            "rope_freq": None if scaling is None else {
                "factor": scaling.factor, "low_freq_factor": scaling.low_freq_factor,
                "high_freq_factor": scaling.high_freq_factor,
                "original_context_length": scaling.original_context_length}}


def book_state_dict(ours: dict) -> dict:
    """Our state dict in the book's names: nn.RMSNorm calls its parameter ``weight``."""
    return {(k[: -len("scale")] + "weight") if k.endswith(".scale") else k: v
            for k, v in ours.items()}
