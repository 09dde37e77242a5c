"""The generator's versions: old seeds keep their programs, the new version writes its
constructs as valid programs, and the harness catches what those constructs can get wrong."""

import contextlib
import hashlib
import io

import pytest
import torch

from .compare import differences
from .generator import Program
from .generator_v4 import BuilderV4
from .runner import (
    Outcome,
    ambient_mode,
    build_args,
    compare,
    eager_hops,
    invoke,
    load,
    run_program,
    unload,
)
from .versions import BUILDERS, LATEST, generate

# sha256 (first 16 hex digits) of version 1 programs as they were before versions existed:
# campaigns and FOUND_SEEDS name these seeds, so their programs must never change.
VERSION_1_PROGRAMS = {
    0: "f4f8c379c76e97b9", 1: "d91a5e11a8587e77", 17: "f7026a547be5f0ab",
    204439: "a3542c7db1039cab", 302024: "c333e0287dbc39ca", 310000: "a178c790217cabad",
    319999: "b96a35b26dac6ae0",
}
# Version 2 programs as its first campaigns ran them (docs/fuzzing.md lists their seeds).
VERSION_2_PROGRAMS = {0: "9e8dcb7650af7d81", 67: "4c293572c1fe6c0a", 139: "433c1c0c18e056a7",
                      999: "29e681636c3d9fd1"}
# Version 3 programs as its 10,000-program campaign runs them (on 29ad874), and version 4's as
# its first campaign ran them.
VERSION_3_PROGRAMS = {0: "f4c951f4e953adb6", 89: "bb8756bd792fec88", 221: "b6fd8998ed69bab2",
                      299: "8d9ebab429979596"}
VERSION_4_PROGRAMS = {0: "310bfd5c5d3c6eaa", 5: "96374d279b40cb4e", 38: "ba50caf35fb04bef",
                      199: "6f254d5506b21d1d"}
# Version 5 programs as its first campaign (seeds 500000-500599) ran them.
VERSION_5_PROGRAMS = {0: "0130c37fac923a01", 26: "23bde3f047035c98", 2081: "fa5104a8bbaba968",
                      500000: "6ea72c20df1079e4", 500599: "315fd6c31ddb5184"}

# Text that shows each construct of version 2 in a program (docs/fuzzing.md lists them).
VERSION_2_MARKERS = {
    "attributes on tensors": ("scale_hint", "step_no", "tag_w", "meta_k"),
    "class attributes through type() and super()": ("type(knob).scale", "super(Fine",
                                                    "Knob.scale", "parent_scale()"),
    "metaclass hooks": ("Matrixlike)",),
    "nonlocal writes in inlined helpers": ("nonlocal calls_n", "nonlocal counter"),
    "containers mutated and read at a break": ("G_ORDER.", "print(sizes"),
    "dict and set iteration with mutation": ("in table", "in seen"),
    "exception chaining": ("from err", "from None", "__cause__", "__context__"),
    "modules with hooks, buffers, __call__": ("register_forward_hook", "def __call__(self, t)",
                                              ".seen.mul_("),
    "dataclasses and NamedTuples": ("dataclasses.replace(", "_replace(", "Point._make"),
    "functools, sorted(key=), itertools": ("functools.partial", "key=lambda", "itertools."),
    "custom context managers": ("with Scope(", "with scaled_by(", "contextlib.suppress"),
    "state changed between calls": ("Knob.", "Meta.", "G_ORDER[:]"),
}

# Text that shows each construct version 4 adds (docs/fuzzing.md lists them); the modes the
# caller enters are in ``Program.ambient``.
VERSION_4_MARKERS = {
    "a pass-through subclass": ("PassT)",), "a subclass overriding add": ("ScaledT)",),
    "a subclass carrying an attribute": ("TaggedT)",),
    "a subclass made in the frame": (").as_subclass(", "_make_subclass("),
    "a subclass as an argument": (".as_subclass(PassT)", ".as_subclass(ScaledT)",
                                  "with_tag("),
    "a function mode in the frame": ("with OpLog()", "with BumpMul()"),
    "a dispatch mode in the frame": ("with AtenLog()", "with DoubleAdd()"),
    "a function mode around the call": ("'OpLog()'", "'BumpMul()'"),
    "a dispatch mode around the call": ("'AtenLog()'", "'DoubleAdd()'"),
    "torch.autograd.Function": ("Square.apply(", "ClampGrad.apply("),
    "its backward through autograd.grad": ("torch.autograd.grad(",),
    "nested_compile_region": ("region_block(",),
    "NumPy interop": (".numpy()",),
    "generator close": (".close(),",), "generator throw": (".throw(",),
    "generator send": (".send(",), "autocast": ("torch.autocast(",),
}

# Text that shows each construct version 5 adds (docs/fuzzing.md lists them).
VERSION_5_MARKERS = {
    "a custom operator with a fake kernel and autograd": ("scale_op(", "register_autograd("),
    "a custom operator that mutates its argument": ("bump_op(", "OPS.bump.default("),
    "an operator through its packet and .default": ("OPS.scale(", "OPS.scale.default(",
                                                    "OPS.pair.default("),
    "gradients through a custom operator": ("torch.autograd.grad(scale_op(",),
    "nn.MultiheadAttention": ("nn.MultiheadAttention(",),
    "an attention mask": ("attn_mask=",), "a key padding mask": ("key_padding_mask=",),
    "nn.TransformerEncoderLayer": ("nn.TransformerEncoderLayer(",),
    "nn.LSTM": ("nn.LSTM(",), "nn.GRU": ("nn.GRU(",),
    "a module in eval mode": (".eval()",),
    "cond with a tensor predicate": (".sum() > 0, lambda a:", ".sum() > 0, then_fn"),
    "cond with nested functions": ("def then_fn(a, b):",),
    "cond closing over a frame's tensor": tuple(f"lambda a: {body} {name}"
                                                for name in ("x", "h", "out")
                                                for body in ("a.sin() *", "a.cos() +")),
    "while_loop, counted": ("lambda i, a: i < ",),
    "while_loop on data": ("(i < 6) & (a.abs().sum()",),
    "checkpoint": ("torch.utils.checkpoint.checkpoint(",),
    "checkpoint's backward": ("torch.autograd.grad(torch.utils.checkpoint.checkpoint(",),
    "np.sum, np.mean, np.cumsum": ("np.sum(", "np.mean(", "np.cumsum("),
    "@ of arrays": (".T @ ",), "an ndarray argument": (".numpy(),)", ").numpy(), "),
    "torch._check": ("torch._check(",), "torch._check_is_size": ("torch._check_is_size(",),
    "size marks by the caller": ("maybe_mark_dynamic(args[0]", "mark_static(args[0]"),
    "allow_in_graph helpers": ("opaque_mix(", "opaque_norm("),
    "disabled helpers": ("eager_log(", "eager_shape("),
}

# Exceptions eager may raise in version 2 programs: the ones the programs mean to raise (an
# escape, a chained exception, iteration over a changing dict or set, a missing key or
# index). A NameError, an AttributeError or a TypeError of another kind is a generator bug.
MEANT = ("AssertionError", "ValueError", "KeyError", "IndexError", "RuntimeError", "TypeError")
MEANT_TYPE_ERRORS = ("unsupported", "negative", "exception causes must derive")


def program_hash(program: Program) -> str:
    text = (program.source + "\0" + "\0".join(program.variants) + "\0" + repr(program.calls)
            + repr(program.counter) + program.entry)
    if program.ambient:  # version 4 on: the modes around the calls (older versions have none)
        text += "\0" + "\0".join(program.ambient)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_old_seeds_keep_their_programs():
    for version, pinned in ((1, VERSION_1_PROGRAMS), (2, VERSION_2_PROGRAMS),
                            (3, VERSION_3_PROGRAMS), (4, VERSION_4_PROGRAMS),
                            (5, VERSION_5_PROGRAMS)):
        for seed, digest in pinned.items():
            assert program_hash(generate(seed, version)) == digest, (version, seed)


def test_every_version_is_seeded_and_knows_its_number():
    assert LATEST == max(BUILDERS) == 5
    for version in BUILDERS:
        assert generate(5, version) == generate(5, version)
        assert generate(5, version).version == version
    assert generate(5, 1).source != generate(5, 2).source
    with pytest.raises(ValueError, match="no generator version"):
        generate(5, 99)


def test_version_3_repeats_the_first_arguments_after_a_change_of_state():
    program = generate(3, 3)
    assert program.calls == (0, 0, 4, 1, 2, 3)
    changed, first = program.variants[4], program.variants[0]
    assert changed.endswith(first) and changed != first, "a state change, then the same call"
    assert generate(3, 2).calls == (0, 0, 1, 2, 3)


def test_version_2_writes_every_construct():
    programs = [generate(seed, 2) for seed in range(60)]
    sources = "\n".join(p.source + "\n".join(p.variants) for p in programs)
    missing = [what for what, markers in VERSION_2_MARKERS.items()
               if not any(marker in sources for marker in markers)]
    assert not missing


def test_version_4_writes_every_construct():
    programs = [generate(seed, 4) for seed in range(150)]
    sources = "\n".join(p.source + "\n".join(p.variants) + repr(p.ambient) for p in programs)
    missing = [what for what, markers in VERSION_4_MARKERS.items()
               if not any(marker in sources for marker in markers)]
    assert not missing
    assert all(not generate(seed, 3).ambient for seed in range(20)), "version 3 enters no mode"


def test_version_4_enters_a_mode_around_calls_of_equal_arguments_differently():
    programs = [p for p in (generate(seed, 4) for seed in range(80)) if p.ambient]
    assert programs
    for program in programs:
        assert len(program.ambient) == len(program.variants)
        first, changed = program.ambient[0], program.ambient[BuilderV4.CHANGED]
        assert program.calls[:3] == (0, 0, BuilderV4.CHANGED)
        assert bool(first) != bool(changed), "the same arguments with and without the mode"
        assert program.variants[0].startswith("G_OPS.clear()"), "equal state before each call"


def test_version_5_writes_every_construct():
    programs = [generate(seed, 5) for seed in range(200)]
    sources = "\n".join(p.source + "\n".join(p.variants) for p in programs)
    missing = [what for what, markers in VERSION_5_MARKERS.items()
               if not any(marker in sources for marker in markers)]
    assert not missing


def test_version_5_names_its_operators_anew_at_every_load():
    # Operator names are process-wide: a second definition under a name in use crashes torch.
    program = generate(next(s for s in range(200) if "scale_op" in generate(s, 5).source), 5)
    try:
        first, second = load(program, "eager"), load(program, "eager")
        assert first["ops_namespace"]() != second["ops_namespace"]()
        assert first["OPS"].scale.default(torch.ones(2), 2.0).tolist() == \
            second["scale_op"](torch.ones(2), 2.0).tolist()
    finally:
        unload(program)


@pytest.mark.parametrize("version", [2, 4, 5])
def test_programs_raise_only_what_they_mean_to(version):
    for seed in range(60):
        program = generate(seed, version)
        namespace = load(program, "eager")
        try:
            for variant in program.calls:
                args, kwargs = build_args(program, variant, namespace)
                try:
                    with contextlib.redirect_stdout(io.StringIO()), eager_hops(), \
                            ambient_mode(program, variant, namespace):
                        namespace[program.entry](*args, **kwargs)
                except Exception as error:  # noqa: PERF203 - the error is what is checked
                    name = type(error).__name__
                    assert name in MEANT, (seed, error)
                    if name == "TypeError":
                        assert any(m in str(error) for m in MEANT_TYPE_ERRORS), (seed, error)
        finally:
            unload(program)


def test_the_second_identical_call_must_be_a_cache_hit():
    # A module's attribute is no program state the harness compares, but a guard reads it:
    # the second call compiles again, and the harness says so.
    source = ('import torch\nimport types\n\nholder = types.ModuleType("holder")\n'
              "holder.k = 0\n\ndef f(x):\n    return x * holder.k\n")
    variant = "holder.k += 1\nargs = (torch.ones(2),)\nkwargs = {}"
    program = generate(0, 1).replace(source=source, entry="f", variants=(variant,),
                                     calls=(0, 0), counter=False)
    found = run_program(program).difference
    assert found is not None and found.kind == "recompile" and found.call == 1


def test_a_state_change_between_the_first_calls_allows_a_recompile():
    source = "import torch\n\nK = 0\n\ndef f(x):\n    return x * K\n"
    variant = "K += 1\nargs = (torch.ones(2),)\nkwargs = {}"
    program = generate(0, 1).replace(source=source, entry="f", variants=(variant,),
                                     calls=(0, 0), counter=False)
    assert run_program(program).difference is None


def _raised(make) -> BaseException:
    try:
        make()
    except Exception as error:  # noqa: BLE001 - the test keeps what was raised
        return error
    raise AssertionError("nothing raised")


def test_exception_causes_and_contexts_are_compared():
    def chained():
        try:
            raise KeyError("k")
        except KeyError as e:
            raise ValueError("v") from e

    def plain():
        raise ValueError("v")

    def outcome(error):
        return Outcome(error=error, args=((), {}), state={})
    found = compare(outcome(_raised(chained)), outcome(_raised(plain)), "<user>")
    assert found is not None and found.kind == "exception" and "chain" in found.signature
    assert compare(outcome(_raised(chained)), outcome(_raised(chained)), "<user>") is None


def test_objects_equal_only_to_themselves_are_compared_by_type():
    class Base:
        pass

    class Child(Base):
        pass
    assert not differences(super(Child, Child()), super(Child, Child()))
    assert not differences(iter([1]), iter([2]))
    assert differences(iter([1]), iter((1,)))


def test_attributes_on_tensors_and_module_state_are_compared():
    a, b = torch.ones(2), torch.ones(2)
    a.tag = 1
    b.tag = 2
    assert differences(a, b)
    b.tag = 1
    assert not differences(a, b)
    torch.manual_seed(0)
    m1 = torch.nn.Linear(2, 2)
    torch.manual_seed(0)
    m2 = torch.nn.Linear(2, 2)
    assert not differences(m1, m2)
    m2.calls = 1
    assert differences(m1, m2)
    m1.calls = 1
    m2.register_forward_hook(lambda *args: None)
    assert differences(m1, m2)


SUBCLASS_PROGRAM = """import torch


class PassT(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def f(x):
    return x.as_subclass(PassT) + 1
"""


def test_a_subclass_result_must_stay_a_subclass():
    eager, compiled = load_both(SUBCLASS_PROGRAM)
    e = eager["f"](torch.ones(2))
    assert type(e).__name__ == "PassT"
    assert not differences(e, compiled["f"](torch.ones(2))), "the other run's class, same name"
    assert differences(e, torch.ones(2) + 1), "a plain tensor where eager gave a subclass"
    assert differences(e, torch.ones(2)), "values of subclasses are compared"


def load_both(source: str) -> tuple[dict, dict]:
    program = generate(0, 1).replace(source=source, entry="f", variants=("",), calls=(0,))
    try:
        return load(program, "eager"), load(program, "compiled")
    finally:
        unload(program)


MODE_PROGRAM = """import torch
from torch.utils._python_dispatch import TorchDispatchMode

G_OPS = []


class DoubleAdd(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        G_OPS.append(func.overloadpacket.__name__)
        out = func(*args, **(kwargs or {}))
        return out * 2 if func is torch.ops.aten.add.Tensor else out


def f(x):
    return x + 1
"""


def test_the_harness_enters_the_callers_mode_around_eager_and_compiled_calls():
    variant = "G_OPS.clear()\nargs = (torch.ones(2),)\nkwargs = {}"
    program = generate(0, 1).replace(source=MODE_PROGRAM, entry="f", variants=(variant,) * 2,
                                     calls=(0, 0, 1), counter=False,
                                     ambient=("", "DoubleAdd()"))
    namespace = load(program, "eager")
    try:
        plain = invoke(namespace["f"], *build_args(program, 0, namespace), namespace,
                       ambient_mode(program, 0, namespace))
        moded = invoke(namespace["f"], *build_args(program, 1, namespace), namespace,
                       ambient_mode(program, 1, namespace))
    finally:
        unload(program)
    assert plain.result.tolist() == [2.0, 2.0] and moded.result.tolist() == [4.0, 4.0]
    assert moded.state["G_OPS"] == ["add"], "the mode sees the call (not its own ops)"
    # Compiled under the same mode as eager: a compile made without the mode is not reused.
    assert run_program(program).difference is None


def test_version_4_writes_a_subclass_only_where_a_tensor_to_make_it_from_is_in_scope():
    # Seed 905 once crashed the generator: a subclass statement drawn in a helper's body with
    # no tensor of its shape in scope. Only seeds that crashed changed with the fix.
    for seed in (905, 1339, 1896):
        assert generate(seed, 4).source
