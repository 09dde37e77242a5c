"""transformers compiles its own model, and graphlift does the compiling: graphlift.install().

The library is not changed: ``model.compile()`` (``nn.Module.compile``) and transformers' helper
``model.get_compiled_call()`` (which calls ``torch.compile(self.__call__, ...)`` itself) both
reach graphlift once it is installed. The model is a tiny GPT-2 built from a config with random
weights, so nothing is downloaded. Run: ``python examples/install_transformers.py``; a script that
does not import graphlift runs the same way with ``python -m graphlift run SCRIPT``.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.generation.configuration_utils import CompileConfig

import graphlift
from graphlift.testing import CompileCounter

graphlift.install()  # torch.compile and nn.Module.compile now compile with graphlift
print(f"torch.compile is graphlift's: {torch.compile.__module__ == 'graphlift.dropin'}")

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=256, n_positions=64,
                    bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config).eval()
tokens = torch.randint(0, config.vocab_size, (1, 16))

with torch.no_grad():
    expected = model(tokens).logits

    backend = CompileCounter()  # counts the graphs it is given, then runs them
    model.compile(backend=backend)  # nn.Module.compile: transformers' model, compiled in place
    for _ in range(2):  # the first call compiles, the second hits the cache
        logits = model(tokens).logits
    torch.testing.assert_close(logits, expected)
    stats = graphlift.stats(model)  # the forward frame's; resume functions have their own
    print(f"model.compile(): same logits as eager; {backend.frame_count} graphs compiled; "
          f"forward: {stats.graph_breaks} graph break, then {stats.hits} cache hit")

    # transformers' own helper: it calls torch.compile(self.__call__, **compile_config) itself.
    compiled_call = model.get_compiled_call(CompileConfig(backend="eager", mode=None))
    torch.testing.assert_close(compiled_call(tokens).logits, expected)
    print("model.get_compiled_call(): same logits as eager")

graphlift.uninstall()  # torch's torch.compile is back
