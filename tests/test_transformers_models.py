"""Tiny transformers models (random weights, nothing downloaded) traced whole: their outputs equal
eager's, in one graph with no break, as under torch.compile 2.13.

These are the object-model constructs real libraries are written in, end to end: ``ModelOutput``
dataclasses (an OrderedDict subclass), the output-capturing registry (a dict subclass calling
``super().get``), attention registries (a ``MutableMapping``), ``PretrainedConfig``'s
``__getattribute__``, ``torch.compiler.is_compiling()``, and ``logger.warning_once`` when a loss
is computed. ``benchmarks/capture.py`` measures the same on more families, side by side with
torch.compile (which also gives one graph and no break for each of these, except the training
step of GPT-2, where it gives 2 graphs and 3 breaks at ``warning_once``).
"""

from __future__ import annotations

import pytest
import torch

import graphlift
from graphlift.testing import CompileCounter

transformers = pytest.importorskip("transformers")

TINY = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)

# name -> (family, config overrides, model class, given labels: a loss and its warning_once)
MODELS = {
    "llama": ("llama", dict(num_key_value_heads=2), "LlamaForCausalLM", False),
    "bert": ("bert", dict(), "BertModel", False),
    "gpt2_loss": ("gpt2", dict(n_embd=32, n_layer=2, n_head=2, n_positions=32),
                  "GPT2LMHeadModel", True),
}


def build(name: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    family, overrides, class_name, labels = MODELS[name]
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(family, **{**TINY, **overrides})
    config.use_cache = False
    config._attn_implementation = "eager"
    for attr in ("dropout", "hidden_dropout_prob", "attention_probs_dropout_prob",
                 "resid_pdrop", "embd_pdrop", "attn_pdrop"):
        if hasattr(config, attr):
            setattr(config, attr, 0.0)
    model = getattr(transformers, class_name)(config).eval()
    ids = torch.randint(3, TINY["vocab_size"], (2, 8))
    inputs = {"input_ids": ids}
    if labels:
        inputs["labels"] = ids
    return model, inputs


@pytest.mark.parametrize("name", sorted(MODELS))
def test_tiny_model_in_one_graph(name: str) -> None:
    model, inputs = build(name)
    with torch.no_grad():
        expected = model(**inputs)
        report = graphlift.explain(type(model).forward)(model, **inputs)
        graphlift.reset()
        counter = CompileCounter()
        compiled = graphlift.compile(model, backend=counter)
        got = compiled(**inputs)
        again = compiled(**inputs)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    assert counter.frame_count == 1, "the second call recompiled"
    assert type(got) is type(expected)
    assert list(got.keys()) == list(expected.keys())
    for key in expected.keys():
        torch.testing.assert_close(got[key], expected[key])
        torch.testing.assert_close(again[key], expected[key])
    torch.testing.assert_close(got.to_tuple()[0], expected.to_tuple()[0])
