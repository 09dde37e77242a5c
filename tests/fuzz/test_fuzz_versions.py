"""The generator's versions: old seeds keep their programs, the new version writes its
constructs as valid programs, and the harness catches what those constructs can get wrong."""

import contextlib
import hashlib
import io

import pytest
import torch

from .compare import differences
from .generator import Program
from .runner import Outcome, build_args, compare, load, run_program, unload
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

# Exceptions eager may raise in version 2 programs: the ones the programs mean to raise (an
# escape, a chained exception, iteration over a changing dict or set, a missing key or
# index). A NameError, an AttributeError or a TypeError of another kind is a generator bug.
MEANT = ("AssertionError", "ValueError", "KeyError", "IndexError", "RuntimeError", "TypeError")
MEANT_TYPE_ERRORS = ("unsupported", "negative", "exception causes must derive")


def program_hash(program: Program) -> str:
    text = (program.source + "\0" + "\0".join(program.variants) + "\0" + repr(program.calls)
            + repr(program.counter) + program.entry)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_old_seeds_keep_their_programs():
    for version, pinned in ((1, VERSION_1_PROGRAMS), (2, VERSION_2_PROGRAMS)):
        for seed, digest in pinned.items():
            assert program_hash(generate(seed, version)) == digest, (version, seed)


def test_every_version_is_seeded_and_knows_its_number():
    assert LATEST == max(BUILDERS) == 3
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


def test_version_2_programs_raise_only_what_they_mean_to():
    for seed in range(60):
        program = generate(seed, 2)
        namespace = load(program, "eager")
        try:
            for variant in program.calls:
                args, kwargs = build_args(program, variant, namespace)
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
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
