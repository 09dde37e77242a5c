"""How much of torch.compile's graph graphlift captures on real models, side by side.

For each model family of ``transformers`` (built from a tiny config with random weights: nothing
is downloaded) and each model of the zoo, one forward under ``no_grad`` in eval mode is run
eagerly, under graphlift and under torch.compile, both with a counting backend (graphs run
eagerly). Reported per model: graphs, graph breaks and operations (call nodes) of each, whether
graphlift's output equals eager's, and graphlift's operations as a share of torch.compile's. The
total line sums the operations over all models.

    .venv/bin/python benchmarks/capture.py                # every family
    .venv/bin/python benchmarks/capture.py llama bert     # some of them
    .venv/bin/python benchmarks/capture.py --markdown     # the README table

A share near 100% with equal outputs is what counts; a share near 0% with equal outputs means the
model ran eagerly (correct, but nothing was compiled).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch._dynamo
import torch._dynamo.testing

# The checkout this file is in, not whichever graphlift is installed: run as a script, Python
# puts benchmarks/ (not the working directory) first on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import graphlift  # noqa: E402

torch.set_num_threads(1)

TINY = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)

# family -> (config overrides on TINY, model class name). One row per model family; decoder
# families use their causal-LM head, encoders the bare model, seq2seq the conditional-generation
# model (given decoder inputs).
FAMILIES: dict[str, tuple[dict, str]] = {
    "gpt2": (dict(n_embd=32, n_layer=2, n_head=2, n_positions=32), "GPT2LMHeadModel"),
    "llama": (dict(num_key_value_heads=2), "LlamaForCausalLM"),
    "mistral": (dict(num_key_value_heads=2), "MistralForCausalLM"),
    "qwen2": (dict(num_key_value_heads=2), "Qwen2ForCausalLM"),
    "gemma": (dict(num_key_value_heads=2, head_dim=16), "GemmaForCausalLM"),
    "phi": (dict(), "PhiForCausalLM"),
    "gpt_neox": (dict(), "GPTNeoXForCausalLM"),
    "opt": (dict(ffn_dim=64, word_embed_proj_dim=32), "OPTForCausalLM"),
    "bert": (dict(), "BertModel"),
    "roberta": (dict(), "RobertaModel"),
    "distilbert": (dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64), "DistilBertModel"),
    "albert": (dict(embedding_size=16), "AlbertModel"),
    "electra": (dict(embedding_size=16), "ElectraModel"),
    "t5": (dict(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2), "T5Model"),
    "bart": (dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64),
             "BartModel"),
}
SEQ2SEQ = {"t5", "bart"}


@dataclass
class Capture:
    """What one system captured in one forward."""

    graphs: int = 0
    breaks: int = 0
    ops: int = 0
    error: str | None = None


def build_family(family: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    import transformers

    overrides, class_name = FAMILIES[family]
    config = transformers.AutoConfig.for_model(family, **{**TINY, **overrides})
    config.use_cache = False
    config._attn_implementation = "eager"
    for name in ("dropout", "hidden_dropout_prob", "attention_probs_dropout_prob"):
        if hasattr(config, name):
            setattr(config, name, 0.0)
    model = getattr(transformers, class_name)(config).eval()
    ids = torch.randint(3, TINY["vocab_size"], (2, 8))
    inputs = {"input_ids": ids}
    if family in SEQ2SEQ:
        inputs["decoder_input_ids"] = ids[:, :4]
    return model, inputs


def first_tensor(value: object) -> torch.Tensor:
    """The model's main output (logits or last hidden state), whatever container holds it."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        return first_tensor(next(iter(value.values())))
    if isinstance(value, (tuple, list)):
        return first_tensor(value[0])
    return first_tensor(value.to_tuple())


def run_graphlift_explained(model: torch.nn.Module, inputs: dict) -> tuple[Capture, object]:
    """graphlift's graphs, breaks and ops through explain(), which counts every frame it ran."""
    graphlift.reset()
    with torch.no_grad():
        report = graphlift.explain(type(model).forward)(model, **inputs)
    capture = Capture(report.graph_count, report.graph_break_count, report.op_count)
    graphlift.reset()
    with torch.no_grad():
        out = graphlift.compile(model, backend="eager")(**inputs)
    return capture, out


def run_torch_compile(model: torch.nn.Module, inputs: dict) -> Capture:
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    with torch.no_grad():
        torch.compile(model, backend=counter)(**inputs)
    breaks = sum(len(v) for v in torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.utils.counters.clear()
    return Capture(counter.frame_count, breaks, counter.op_count)


def measure(name: str, build: Callable) -> dict:
    model, inputs = build(name)
    with torch.no_grad():
        expected = first_tensor(model(**inputs))
    row = {"model": name}
    start = time.perf_counter()
    try:
        ours, out = run_graphlift_explained(model, inputs)
        row["equal"] = torch.allclose(first_tensor(out), expected, atol=1e-5, rtol=1e-4)
    except Exception as error:  # a benchmark reports what broke and carries on
        ours, row["equal"] = Capture(error=f"{type(error).__name__}: {error}"[:120]), False
    row["graphlift_s"] = time.perf_counter() - start
    try:
        theirs = run_torch_compile(model, inputs)
    except Exception as error:
        theirs = Capture(error=f"{type(error).__name__}: {error}"[:120])
    row["graphlift"], row["torch_compile"] = ours, theirs
    return row


def share(ours: int, theirs: int) -> str:
    return f"{100 * ours / theirs:.0f}%" if theirs else "-"


def print_table(rows: list[dict], markdown: bool) -> None:
    head = ("model", "graphlift graphs/breaks/ops", "torch.compile graphs/breaks/ops",
            "ops captured", "equals eager")
    lines = []
    for row in rows:
        ours, theirs = row["graphlift"], row["torch_compile"]
        cells = (row["model"],
                 ours.error or f"{ours.graphs}/{ours.breaks}/{ours.ops}",
                 theirs.error or f"{theirs.graphs}/{theirs.breaks}/{theirs.ops}",
                 share(ours.ops, theirs.ops), "yes" if row["equal"] else "NO")
        lines.append(cells)
    total_ours = sum(r["graphlift"].ops for r in rows)
    total_theirs = sum(r["torch_compile"].ops for r in rows)
    whole = sum(r["graphlift"].graphs == 1 and r["graphlift"].breaks == 0 for r in rows)
    lines.append(("total", f"{total_ours} ops", f"{total_theirs} ops",
                  share(total_ours, total_theirs),
                  f"{sum(r['equal'] for r in rows)}/{len(rows)}"))
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for cells in lines:
            print("| " + " | ".join(cells) + " |")
    else:
        widths = [max(len(str(c[i])) for c in [head, *lines]) for i in range(len(head))]
        for cells in [head, *lines]:
            print("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)))
    print(f"\n{whole}/{len(rows)} models in one graph with no break under graphlift "
          f"({Path(graphlift.__file__).parent})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help=f"some of: {', '.join(FAMILIES)}")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    options = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    rows = []
    for family in options.families or FAMILIES:
        with contextlib.redirect_stdout(io.StringIO()):
            rows.append(measure(family, build_family))
        row = rows[-1]
        print(f"  {family}: graphlift {row['graphlift']}  torch.compile {row['torch_compile']}",
              flush=True)
    print()
    print_table(rows, options.markdown)


if __name__ == "__main__":
    main()
