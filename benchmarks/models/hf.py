"""Models from the ``transformers`` package, built from small configs with random weights.

Nothing is downloaded: a config object is all a model class needs. Both use the eager
attention implementation, which is plain torch code.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

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


# ---------------------------------------------------------------------------------------------
# The transformers zoo of issue 13: one row per family, tiny configs (each model builds and runs
# in about a second), random weights. ``benchmarks/zoo.py`` and ``tests/test_model_zoo.py`` run
# every row in each of its modes.

TINY = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)
_VISION = dict(image_size=16, patch_size=4, num_channels=3)
_SEQ2SEQ = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64)

# What each kind of model takes and which modes apply to it: ``eval`` (no_grad, eval mode,
# no cache), ``cache`` (the same with use_cache=True: the prefill returns a cache), ``decode``
# (one new token given the prefill's cache as input; an encoder-decoder also gets the prefill's
# encoder output, as ``generate`` gives it, and does not encode again) and ``train`` (train
# mode, dropout 0: the forward with labels or a loss over its first output, then backward).
KINDS: dict[str, tuple[str, ...]] = {
    "lm": ("eval", "cache", "decode", "train"),     # a causal LM head, given labels in training
    "encoder": ("eval", "train"),                   # a bare text encoder
    "seq2seq": ("eval", "cache", "decode", "train"),  # encoder-decoder given decoder inputs
    "vision": ("eval", "train"),                    # pixel_values (2, 3, 16, 16)
    "audio": ("eval", "train"),                     # input_values (2, 400): a waveform
    "speech2seq": ("eval", "cache", "decode", "train"),  # input_features (2, 8, 32), decoder inputs
}


@dataclass
class Family:
    """One transformers model family: its config type, overrides on TINY, class and kind."""

    model_type: str
    overrides: dict
    class_name: str
    kind: str
    tiny_defaults: bool = True      # start from TINY (text models) or from the class defaults


ZOO: dict[str, Family] = {
    # decoder LMs
    "gpt2": Family("gpt2", dict(n_embd=32, n_layer=2, n_head=2, n_positions=32, bos_token_id=0,
                        eos_token_id=0), "GPT2LMHeadModel", "lm"),
    "llama": Family("llama", dict(num_key_value_heads=2), "LlamaForCausalLM", "lm"),
    "mistral": Family("mistral", dict(num_key_value_heads=2), "MistralForCausalLM", "lm"),
    "qwen2": Family("qwen2", dict(num_key_value_heads=2), "Qwen2ForCausalLM", "lm"),
    "qwen3": Family("qwen3", dict(num_key_value_heads=2, head_dim=16), "Qwen3ForCausalLM", "lm"),
    "gemma": Family("gemma", dict(num_key_value_heads=2, head_dim=16), "GemmaForCausalLM", "lm"),
    "phi": Family("phi", dict(), "PhiForCausalLM", "lm"),
    "gpt_neox": Family("gpt_neox", dict(), "GPTNeoXForCausalLM", "lm"),
    "opt": Family("opt", dict(ffn_dim=64, word_embed_proj_dim=32), "OPTForCausalLM", "lm"),
    "bloom": Family("bloom", dict(n_layer=2, n_head=2), "BloomForCausalLM", "lm"),
    "falcon": Family("falcon", dict(), "FalconForCausalLM", "lm"),
    "gptj": Family("gptj", dict(n_embd=32, n_layer=2, n_head=2, n_positions=32, rotary_dim=8,
                                      bos_token_id=0, eos_token_id=0),
                   "GPTJForCausalLM", "lm"),
    # mixture of experts
    "mixtral": Family("mixtral", dict(num_key_value_heads=2, num_local_experts=4,
                                      num_experts_per_tok=2), "MixtralForCausalLM", "lm"),
    "qwen2_moe": Family("qwen2_moe", dict(num_key_value_heads=2, num_experts=4,
                                          num_experts_per_tok=2, moe_intermediate_size=32,
                                          shared_expert_intermediate_size=32),
                        "Qwen2MoeForCausalLM", "lm"),
    # state space
    "mamba": Family("mamba", dict(state_size=8, expand=2, conv_kernel=4), "MambaForCausalLM",
                    "lm"),
    # text encoders
    "bert": Family("bert", dict(), "BertModel", "encoder"),
    "roberta": Family("roberta", dict(), "RobertaModel", "encoder"),
    "distilbert": Family("distilbert", dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64),
                         "DistilBertModel", "encoder"),
    "albert": Family("albert", dict(embedding_size=16), "AlbertModel", "encoder"),
    "electra": Family("electra", dict(embedding_size=16), "ElectraModel", "encoder"),
    # encoder-decoders
    "t5": Family("t5", dict(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2),
                 "T5Model", "seq2seq"),
    "bart": Family("bart", _SEQ2SEQ, "BartModel", "seq2seq"),
    # vision encoders
    "vit": Family("vit", dict(_VISION, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=64),
                  "ViTModel", "vision", tiny_defaults=False),
    "convnext": Family("convnext", dict(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1],
                                        num_stages=2), "ConvNextModel", "vision",
                       tiny_defaults=False),
    "resnet": Family("resnet", dict(num_channels=3, embedding_size=8, hidden_sizes=[8, 16],
                                    depths=[1, 1]), "ResNetModel", "vision", tiny_defaults=False),
    # audio encoders
    "wav2vec2": Family("wav2vec2", dict(TINY, conv_dim=(8, 8), conv_stride=(5, 2),
                                        conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                        num_conv_pos_embedding_groups=2, mask_time_prob=0.0,
                                        layerdrop=0.0), "Wav2Vec2Model", "audio",
                       tiny_defaults=False),
    "whisper": Family("whisper", dict(_SEQ2SEQ, vocab_size=64, num_mel_bins=8,
                                      max_source_positions=16, max_target_positions=32,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                      decoder_start_token_id=1),
                      "WhisperModel", "speech2seq", tiny_defaults=False),
}

_DROPOUTS = ("dropout", "hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop",
             "embd_pdrop", "attn_pdrop", "attention_dropout", "hidden_dropout",
             "activation_dropout",
             "classifier_dropout", "drop_path_rate", "feat_proj_dropout", "final_dropout",
             "layerdrop", "encoder_layerdrop", "decoder_layerdrop", "summary_first_dropout",
             "dropout_rate", "ffn_dropout", "qa_dropout", "seq_classif_dropout")


def family_modes(name: str) -> tuple[str, ...]:
    """The modes that apply to family ``name``."""
    return KINDS[ZOO[name].kind]


def build_family(name: str, mode: str, seed: int = 0) -> tuple[torch.nn.Module, dict]:
    """Family ``name`` built for ``mode`` with parameters from ``seed``, and its inputs.

    The inputs of ``decode`` hold the cache of an eager prefill: give each call its own copy
    (``fresh_inputs``), since a forward appends to the cache it is given.
    """
    import transformers

    family = ZOO[name]
    torch.manual_seed(seed)
    settings = {**TINY, **family.overrides} if family.tiny_defaults else dict(family.overrides)
    config = transformers.AutoConfig.for_model(family.model_type, **settings)
    config.use_cache = mode in ("cache", "decode")
    config._attn_implementation = "eager"
    for attr in _DROPOUTS:
        if isinstance(getattr(config, attr, None), float):
            setattr(config, attr, 0.0)
    model = getattr(transformers, family.class_name)(config)
    model.train(mode == "train")
    return model, _inputs(family, mode, model)


def _inputs(family: Family, mode: str, model: torch.nn.Module) -> dict:
    ids = torch.randint(3, TINY["vocab_size"], (2, 8))
    if family.kind == "vision":
        return {"pixel_values": torch.randn(2, 3, 16, 16)}
    if family.kind == "audio":
        return {"input_values": torch.randn(2, 400)}
    if family.kind in ("seq2seq", "speech2seq"):
        encoder_input = ({"input_features": torch.randn(2, 8, 32)} if family.kind == "speech2seq"
                         else {"input_ids": ids})
        if mode == "decode":
            return _decode_step_inputs(model, encoder_input, ids[:, :4])
        return {**encoder_input, "decoder_input_ids": ids[:, :4]}
    if family.kind == "encoder":
        return {"input_ids": ids}
    if mode == "train":
        return {"input_ids": ids, "labels": ids}
    if mode == "decode":
        with torch.no_grad():
            prefill = model(input_ids=ids, use_cache=True)
        name = _cache_name(model)
        return {"input_ids": ids[:, -1:], name: getattr(prefill, name), "use_cache": True}
    return {"input_ids": ids}


def _decode_step_inputs(model: torch.nn.Module, encoder_input: dict,
                        decoder_ids: torch.Tensor) -> dict:
    """An encoder-decoder's next step after an eager prefill of ``decoder_ids``: the last token,
    the prefill's cache (self- and cross-attention) and its encoder output."""
    from transformers.modeling_outputs import BaseModelOutput

    with torch.no_grad():
        prefill = model(**encoder_input, decoder_input_ids=decoder_ids[:, :-1], use_cache=True)
    name = _cache_name(model)
    encoded = BaseModelOutput(last_hidden_state=prefill.encoder_last_hidden_state)
    return {"encoder_outputs": encoded, "decoder_input_ids": decoder_ids[:, -1:],
            name: getattr(prefill, name), "use_cache": True}


# What a decoder's cache is called, as argument and output field: transformers 5.24 (the newest
# for 3.11-3.13) says ``cache``; 5.20 (the newest for 3.10) ``past_key_values``, or
# ``cache_params`` for state-space models.
CACHE_NAMES = ("cache", "past_key_values", "cache_params")


def _cache_name(model: torch.nn.Module) -> str:
    parameters = inspect.signature(model.forward).parameters
    return next(name for name in CACHE_NAMES if name in parameters)


def fresh_inputs(inputs: dict) -> dict:
    """A copy of ``inputs`` whose cache (a decode step's input) is a copy of its own."""
    import copy

    return {k: copy.deepcopy(v) if k in CACHE_NAMES else v
            for k, v in inputs.items()}
