"""``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder``, in
training and in eval, with and without masks, against eager and torch.compile (recorded:
tests/reference).

Their forwards read what their fast paths need (``is_nested``, ``layout``, the device type,
``torch.is_grad_enabled()``, ``torch.backends.mha.get_fastpath_enabled()``,
``has_torch_function``, the dispatch-mode stack) and check a padding mask's shape with
``torch._check_with`` and a message function: all fold while tracing, so each is one graph, as
under torch.compile. Values are compared on two calls (the second with another batch size, so
automatic dynamic shapes recompile once), and in training the gradients of the inputs and of
every parameter too.
"""

from __future__ import annotations

import functools

import pytest
import torch
from corpus.harness import assert_same
from reference import measure, recorded

import graphlift
from graphlift.testing import CompileCounterWithBackend

D_MODEL, HEADS, SEQ = 8, 2, 5


def _modules() -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    layer = functools.partial(torch.nn.TransformerEncoderLayer, D_MODEL, HEADS, 16,
                              dropout=0.0, batch_first=True)
    return {
        "mha": torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True),
        "layer": layer(),
        "encoder": torch.nn.TransformerEncoder(layer(), 2, enable_nested_tensor=False),
        "encoder_nested": torch.nn.TransformerEncoder(layer(), 2),  # nested fast path in eval
    }


MODULES = _modules()


def _padding(batch: int) -> torch.Tensor:
    """The last two positions of every other sequence are padding."""
    mask = torch.zeros(batch, SEQ, dtype=torch.bool)
    mask[1::2, -2:] = True
    return mask


CAUSAL = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), 1)


def mha(x):
    return MODULES["mha"](x, x, x)[0]


def mha_padding(x):
    out, weights = MODULES["mha"](x, x, x, key_padding_mask=_padding(x.shape[0]))
    return out, weights


def mha_causal(x):
    return MODULES["mha"](x, x, x, attn_mask=CAUSAL, need_weights=False)[0]


def layer(x):
    return MODULES["layer"](x)


def layer_padding(x):
    return MODULES["layer"](x, src_key_padding_mask=_padding(x.shape[0]))


def encoder(x):
    return MODULES["encoder"](x)


def encoder_padding(x):
    return MODULES["encoder"](x, src_key_padding_mask=_padding(x.shape[0]))


def encoder_nested_padding(x):
    return MODULES["encoder_nested"](x, src_key_padding_mask=_padding(x.shape[0]))


CASES = {fn.__name__: fn for fn in (mha, mha_padding, mha_causal, layer, layer_padding, encoder,
                                    encoder_padding, encoder_nested_padding)}
MODES = ("training", "eval")
# Eager's eval encoder with a padding mask packs the batch into a nested tensor, whose padded
# positions come back as zeros; under torch.compile (is_compiling() is True) that fast path is
# off and the padded positions hold the layers' values, as they do in training. graphlift answers
# as torch.compile: the positions that are not padding equal eager's.
PADDING_DIFFERS = {("encoder_nested_padding", "eval")}


def _input(batch: int, grad: bool) -> torch.Tensor:
    x = torch.randn(batch, SEQ, D_MODEL, generator=torch.Generator().manual_seed(batch))
    return x.requires_grad_(grad)


def _set_mode(mode: str) -> None:
    for module in MODULES.values():
        module.train(mode == "training")


def _torch_compile_case(case: str, mode: str) -> dict:
    """torch.compile's graphs and breaks over the two calls (aot_eager). A measure."""
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    _set_mode(mode)
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(CASES[case], backend=counter)
    with torch.set_grad_enabled(mode == "training"):
        for batch in (2, 3):
            compiled(_input(batch, mode == "training"))
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    return {"graphs": counter.frame_count, "breaks": breaks}


def _torch_compile_case_of(fn) -> dict:
    """torch.compile's graphs and breaks for one eval call of ``fn`` (eager). A measure."""
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    _set_mode("eval")
    counter = torch._dynamo.testing.CompileCounterWithBackend("eager")
    with torch.no_grad():
        torch.compile(fn, backend=counter)(_input(2, False))
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    return {"graphs": counter.frame_count, "breaks": breaks}


for _case in CASES:
    for _mode in MODES:
        measure(f"nn_attention/{_case}/{_mode}", functools.partial(_torch_compile_case,
                                                                  _case, _mode))


def _outputs(result) -> list[torch.Tensor]:
    results = result if isinstance(result, tuple) else (result,)
    return [r for r in results if isinstance(r, torch.Tensor)]


def _run(fn, x: torch.Tensor, training: bool) -> tuple:
    """The result, and in training the gradients of the input and of every parameter."""
    for module in MODULES.values():
        module.zero_grad(set_to_none=True)
    result = fn(x)
    if not training:
        return result, ()
    sum(out.sum() for out in _outputs(result)).backward()
    grads = [x.grad] + [p.grad for m in MODULES.values() for p in m.parameters()
                        if p.grad is not None]
    return result, grads


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_graph_values_and_gradients_equal_eager(case, mode, breaks):
    fn = CASES[case]
    training = mode == "training"
    _set_mode(mode)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = graphlift.compile(fn, backend=counter)
    with torch.set_grad_enabled(training):
        for batch in (2, 3):
            expected, expected_grads = _run(fn, _input(batch, training), training)
            got, grads = _run(compiled, _input(batch, training), training)
            if (case, mode) in PADDING_DIFFERS:
                padded = _padding(batch)
                assert torch.all(expected[padded] == 0)  # eager's nested fast path
                got, expected = got[~padded], expected[~padded]
            assert_same(got, expected)
            assert len(grads) == len(expected_grads)
            for g, e in zip(grads, expected_grads):
                torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)
    theirs = recorded(f"nn_attention/{case}/{mode}")
    assert {"graphs": counter.frame_count, "breaks": len(breaks)} == theirs
    assert not breaks, [b.explanation for b in breaks]


def test_a_padding_mask_of_the_wrong_shape_raises_as_in_eager():
    # The shape check passes while tracing only when it holds: a wrong mask breaks the graph
    # and eager's torch._check_with raises its own AssertionError.
    _set_mode("training")
    x = _input(2, False)
    wrong = torch.zeros(3, SEQ, dtype=torch.bool)

    def fn(x, mask):
        return MODULES["mha"](x, x, x, key_padding_mask=mask)[0]

    with pytest.raises(AssertionError) as eager:
        fn(x, wrong)
    with pytest.raises(AssertionError) as compiled:
        graphlift.compile(fn, backend="eager")(x, wrong)
    assert str(compiled.value) == str(eager.value)


def test_fast_path_attributes_fold_under_guards():
    # The attributes nn's fast paths read are constants of the trace; a sparse input (another
    # layout) fails the entry's guards and compiles anew rather than reusing the dense answer.
    def attrs(x):
        return (x.is_nested, x.is_sparse, x.is_quantized, x.is_meta, x.layout, x.device.type,
                torch.overrides.has_torch_function((x,)), torch.backends.mha.get_fastpath_enabled())

    counter = CompileCounterWithBackend("eager")
    compiled = graphlift.compile(attrs, backend=counter)
    dense = torch.ones(2, 2)
    assert compiled(dense) == attrs(dense)
    sparse = dense.to_sparse()
    assert compiled(sparse) == attrs(sparse)


def encoder_causal(x):
    return MODULES["encoder"](x, mask=CAUSAL.float() * -1e9)


measure("nn_attention/encoder_causal", functools.partial(_torch_compile_case_of, encoder_causal))


@pytest.mark.parametrize("mode", MODES)
def test_a_causal_mask_tested_on_its_values_breaks_the_graph(mode):
    # nn.TransformerEncoder compares a float mask with a causal one (_detect_is_causal_mask:
    # bool((mask == causal).all())), which depends on data. torch.compile breaks there and
    # resumes inside the encoder's forward; graphlift cannot resume inside an inlined function,
    # so it breaks at the encoder's call and compiles the encoder's frame on its own: more
    # graphs than torch.compile's (partial), values equal eager's.
    training = mode == "training"
    _set_mode(mode)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = graphlift.compile(encoder_causal, backend=counter)
    with torch.set_grad_enabled(training):
        expected, expected_grads = _run(encoder_causal, _input(2, training), training)
        got, grads = _run(compiled, _input(2, training), training)
    assert_same(got, expected)
    for g, e in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)
    explained = graphlift.explain(encoder_causal)(_input(2, False))
    assert {b.break_type.value for b in explained.break_reasons} == {"data_dependent_branch"}
    assert recorded("nn_attention/encoder_causal")["breaks"] >= 1
