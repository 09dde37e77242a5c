"""Models from the ``transformers`` package, built from small configs with random weights.

Nothing is downloaded: a config object is all a model class needs. Both use the eager
attention implementation, which is plain torch code.
"""

from __future__ import annotations

import torch

SIZES = {"tiny": dict(layers=2, heads=2, dim=32, vocab=64, positions=32, batch=2, seq=8),
         "bench": dict(layers=4, heads=4, dim=64, vocab=256, positions=64, batch=2, seq=16)}


def _logits(out) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def build_gpt2(size: str):
    from transformers import GPT2Config, GPT2LMHeadModel

    c = SIZES[size]
    config = GPT2Config(vocab_size=c["vocab"], n_positions=c["positions"], n_embd=c["dim"],
                        n_layer=c["layers"], n_head=c["heads"], resid_pdrop=0.0,
                        bos_token_id=0, eos_token_id=0,
                        embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                        attn_implementation="eager")
    model = GPT2LMHeadModel(config)

    def inputs() -> tuple[torch.Tensor]:
        return (torch.randint(0, c["vocab"], (c["batch"], c["seq"])),)

    return model, inputs, lambda out: _logits(out).pow(2).mean()


def build_bert(size: str):
    from transformers import BertConfig, BertModel

    c = SIZES[size]
    config = BertConfig(vocab_size=c["vocab"], hidden_size=c["dim"],
                        num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                        intermediate_size=4 * c["dim"], max_position_embeddings=c["positions"],
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        attn_implementation="eager")
    model = BertModel(config)

    def inputs() -> tuple[torch.Tensor]:
        return (torch.randint(0, c["vocab"], (c["batch"], c["seq"])),)

    return model, inputs, lambda out: _logits(out).pow(2).mean()
