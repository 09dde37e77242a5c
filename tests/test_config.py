"""The settings registry: defaults, attribute access, and ``config.patch`` in both forms."""

import pytest
import torch

import graphlift
from graphlift import config
from graphlift.config import SETTINGS, iter_settings
from graphlift.translator import InstructionTranslator, TranslationError


def test_defaults_from_the_issue():
    assert config.recompile_limit == 8
    assert config.accumulated_recompile_limit == 256
    assert config.fail_on_recompile_limit_hit is False
    assert config.error_on_recompile is False
    assert config.defaults() == {name: s.default for name, s in SETTINGS.items()}


def test_every_setting_has_a_one_line_doc():
    for name, setting in iter_settings():
        assert setting.doc and "\n" not in setting.doc, name
    assert set(dir(config)) >= set(SETTINGS)


def test_set_and_reset_to_defaults():
    config.recompile_limit = 3
    assert config.recompile_limit == 3
    config.reset_to_defaults()
    assert config.recompile_limit == 8


def test_patch_as_a_context_manager_restores():
    with config.patch(recompile_limit=2, error_on_recompile=True) as patch:
        assert (config.recompile_limit, config.error_on_recompile) == (2, True)
        assert patch is not None
    assert (config.recompile_limit, config.error_on_recompile) == (8, False)


def test_patch_nests():
    with config.patch(recompile_limit=2):
        with config.patch(recompile_limit=3):
            assert config.recompile_limit == 3
        assert config.recompile_limit == 2
    assert config.recompile_limit == 8


def test_patch_as_a_decorator_restores():
    @config.patch(recompile_limit=4)
    def read(offset):
        return config.recompile_limit + offset

    assert read(1) == 5
    assert read.__name__ == "read"
    assert config.recompile_limit == 8


def test_one_patch_object_decorates_a_recursive_function():
    @config.patch(recompile_limit=1)
    def depth(n):
        return config.recompile_limit if n == 0 else depth(n - 1)

    assert depth(3) == 1
    assert config.recompile_limit == 8


def test_patch_restores_on_exception():
    with pytest.raises(KeyError):
        with config.patch(recompile_limit=1):
            raise KeyError("boom")
    assert config.recompile_limit == 8

    @config.patch(error_on_recompile=True)
    def fails():
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        fails()
    assert config.error_on_recompile is False


@pytest.mark.parametrize("action", [
    lambda: config.recompile_limt,
    lambda: setattr(config, "recompile_limt", 1),
    lambda: config.patch(recompile_limt=1),
])
def test_unknown_name_raises_attribute_error(action):
    message = "no setting 'recompile_limt'; known: .*recompile_limit"
    with pytest.raises(AttributeError, match=message):
        action()


def test_unknown_name_in_patch_changes_nothing():
    with pytest.raises(AttributeError):
        config.patch(recompile_limit=1, nope=2)
    assert config.recompile_limit == 8


def test_raise_internal_errors_raises_graphlifts_own_errors(monkeypatch):
    def broken(self, inst):
        raise RuntimeError("translator bug")

    monkeypatch.setattr(InstructionTranslator, "BINARY_OP", broken)

    def add(x):
        return x + 1

    x = torch.randn(3)
    assert config.raise_internal_errors  # tests/conftest.py turns it on for graphlift's tests
    with pytest.raises(TranslationError, match="translator bug"):
        graphlift.compile(add)(x)
    graphlift.reset()
    with config.patch(raise_internal_errors=False):  # the default: the frame runs eagerly
        compiled = graphlift.compile(add)
        torch.testing.assert_close(compiled(x), add(x))
        with pytest.raises(TranslationError):  # fullgraph never hides an error
            graphlift.compile(add, fullgraph=True)(x)
    stats = graphlift.stats(add)
    assert (stats.eager_frames, stats.graphs, stats.internal_errors) == (1, 0, 1)
