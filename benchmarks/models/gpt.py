"""A GPT-style decoder: causal self-attention, LayerNorm, GELU MLP, embeddings tied to the head."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

SIZES = {"tiny": dict(vocab=64, block=16, layers=2, heads=2, dim=32, batch=2, seq=8),
         "bench": dict(vocab=256, block=32, layers=4, heads=4, dim=64, batch=2, seq=16)}


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, block: int, dropout: float) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.size()
        q, k, v = self.qkv(x).split(dim, dim=2)
        q = q.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2)
        k = k.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2)
        v = v.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        scores = scores.masked_fill(self.mask[:, :, :seq, :seq] == 0, float("-inf"))
        weights = self.attn_dropout(F.softmax(scores, dim=-1))
        y = (weights @ v).transpose(1, 2).contiguous().view(batch, seq, dim)
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    def __init__(self, dim: int, dropout: float) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, 4 * dim)
        self.gelu = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(4 * dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(self.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, block: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, block, dropout)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, layers: int, heads: int, dim: int,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.block_size = block
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(Block(dim, heads, block, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying: one Parameter in two modules

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        seq = idx.size(1)
        assert seq <= self.block_size, f"sequence of {seq} is longer than {self.block_size}"
        pos = torch.arange(0, seq, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def build(size: str):
    config = SIZES[size]
    model = GPT(config["vocab"], config["block"], config["layers"], config["heads"], config["dim"])

    def inputs() -> tuple[torch.Tensor]:
        return (torch.randint(0, config["vocab"], (config["batch"], config["seq"])),)

    def loss(logits: torch.Tensor) -> torch.Tensor:
        targets = torch.arange(logits.size(1)).expand(logits.size(0), -1) % logits.size(-1)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    return model, inputs, loss
