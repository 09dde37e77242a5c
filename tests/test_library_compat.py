"""Libraries that look for torch.compile's wrapper see graphlift's as torch's.

Lightning's ``trainer.fit`` takes a compiled LightningModule only if it is a
``torch._dynamo.OptimizedModule`` (it then compiles the module's ``forward`` and step methods with
the wrapper's ``dynamo_ctx``); accelerate's ``is_compiled_module`` and ``unwrap_model`` check the
same class and read ``_orig_mod``. Both libraries import ``torch._dynamo``, so graphlift's wrapper
subclasses torch's here (``eval_frame.torch_compatible``). Each fit runs beside an eager fit of a
copy of the module, and the losses at every step must be equal; the graph count is compared with
torch.compile's, recorded (tests/reference).
"""

import copy
import io
import logging
import pickle

import accelerate
import lightning.pytorch as pl
import pytest
import torch
import torch._dynamo
from accelerate.utils import extract_model_from_parallel, is_compiled_module
from reference import measure, recorded
from torch import nn

import graphlift
from graphlift import dropin
from graphlift.testing import CompileCounter

STEPS = 3
# Lightning's own code calls torch's deprecated pytree API.
pytestmark = pytest.mark.filterwarnings("ignore:.*treespec, LeafSpec.*is deprecated")


class TinyRegressor(pl.LightningModule):
    """A two-layer regressor trained with SGD (momentum): forward, loss and step are its own."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


class Losses(pl.Callback):
    """The loss of every training step, as Lightning hands it to callbacks."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.seen.append(outputs["loss"].item())


def _data() -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4 * STEPS, 4, generator=generator)
    dataset = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    return torch.utils.data.DataLoader(dataset, batch_size=4)


def _fit(model: nn.Module) -> list[float]:
    """Lightning's fit for ``STEPS`` steps on the CPU, nothing written to disk or the terminal."""
    losses = Losses()
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[losses])
    trainer.fit(model, _data())
    return losses.seen


def _module() -> TinyRegressor:
    torch.manual_seed(0)
    return TinyRegressor()


@pytest.fixture(autouse=True)
def quiet_lightning():
    """Lightning logs its device summary at INFO on every fit."""
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)


def _torch_compile_fit_graphs() -> int:
    """torch.compile's graphs for the fit of a compiled LightningModule. A measure."""
    import torch._dynamo.testing

    counter = torch._dynamo.testing.CompileCounter()
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    _fit(torch.compile(_module(), backend=counter))
    return counter.frame_count


measure("library_compat/lightning_fit_graphs", _torch_compile_fit_graphs)


# -- Lightning -------------------------------------------------------------------------------------
def test_lightning_fits_a_compiled_module_with_eager_s_losses():
    eager_model = _module()
    counter = CompileCounter()
    compiled = graphlift.compile(copy.deepcopy(eager_model), backend=counter)
    assert isinstance(compiled, torch._dynamo.OptimizedModule)
    losses = _fit(compiled)
    assert losses == _fit(eager_model) and len(losses) == STEPS
    assert counter.frame_count == recorded("library_compat/lightning_fit_graphs")


def test_lightning_takes_torch_compile_s_module_under_the_drop_in_switch():
    dropin.install()
    try:
        compiled = torch.compile(_module(), backend="eager")
    finally:
        dropin.uninstall()
    assert isinstance(compiled, torch._dynamo.OptimizedModule)
    assert type(compiled).__module__ == "graphlift.eval_frame"
    unwrapped = pl.utilities.compile.from_compiled(compiled)
    assert unwrapped is compiled._orig_mod and unwrapped._compiler_ctx["compiler"] == "dynamo"
    batch = torch.randn(2, 4), torch.randn(2, 1)
    assert torch.equal(unwrapped.training_step(batch, 0),
                       unwrapped._compiler_ctx["original_training_step"](batch, 0))
    assert pl.utilities.compile.to_uncompiled(unwrapped) is unwrapped


# -- accelerate ------------------------------------------------------------------------------------
def test_accelerate_sees_a_compiled_module_and_unwraps_it():
    model = nn.Linear(3, 2)
    compiled = graphlift.compile(model)
    assert is_compiled_module(compiled) and not is_compiled_module(model)
    unwrap = accelerate.Accelerator(cpu=True).unwrap_model
    assert unwrap(compiled, keep_torch_compile=False) is model
    assert unwrap(compiled, keep_torch_compile=True) is compiled
    assert extract_model_from_parallel(compiled, keep_torch_compile=False) is model


# -- what any code sees of the wrapper ---------------------------------------------------------
def _wrapper_pair() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    return model, graphlift.compile(model)


def test_state_dict_and_names_carry_torch_compile_s_prefix():
    model, compiled = _wrapper_pair()
    names = [f"_orig_mod.{name}" for name in model.state_dict()]
    assert list(compiled.state_dict()) == names
    assert [name for name, _ in compiled.named_parameters()] == names
    assert [name for name, _ in compiled.named_modules()] == \
        ["", "_orig_mod", "_orig_mod.0", "_orig_mod.1", "_orig_mod.2"]
    assert all(p is q for p, q in zip(compiled.parameters(), model.parameters(), strict=True))


def test_load_state_dict_either_way_as_torch_s_wrapper():
    model, compiled = _wrapper_pair()
    other, _ = _wrapper_pair()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1)
    compiled.load_state_dict(graphlift.compile(other).state_dict())
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), other.parameters()))
    model.load_state_dict(other.state_dict())  # the module itself takes plain names
    with pytest.raises(RuntimeError, match='Missing key.*"_orig_mod.0.weight"'):
        compiled.load_state_dict(other.state_dict())
    with pytest.raises(RuntimeError, match='Unexpected key.*"_orig_mod.0.weight"'):
        model.load_state_dict(compiled.state_dict())


def test_attributes_are_the_module_s_to_read_write_and_delete():
    model, compiled = _wrapper_pair()
    compiled.note = "set through the wrapper"
    assert model.note == "set through the wrapper" and "note" not in compiled.__dict__
    del compiled.note
    assert not hasattr(model, "note")
    assert len(compiled) == len(model) == 3
    with pytest.raises(TypeError, match="Linear does not support len"):
        len(graphlift.compile(nn.Linear(2, 2)))
    compiled.eval()
    assert not model.training and not compiled.training
    assert {"_orig_mod", "forward", "dynamo_ctx"} <= set(dir(compiled))
    assert "append" in dir(compiled)  # Sequential's, through the wrapper


def test_dynamo_ctx_compiles_with_the_wrapper_s_options():
    counter = CompileCounter()
    model = nn.Linear(3, 2)
    compiled = graphlift.compile(model, backend=counter)
    step = compiled.dynamo_ctx(lambda x: model(x).relu())
    x = torch.randn(2, 3)
    assert torch.equal(step(x), model(x).relu())
    assert counter.frame_count == 1


@pytest.mark.parametrize("how", ["pickle", "torch.save", "deepcopy"])
def test_pickled_wrapper_is_compiled_again_with_its_options(how):
    model = nn.Linear(3, 2)
    compiled = graphlift.compile(model, backend="aot_eager", dynamic=False)
    x = torch.randn(2, 3)
    compiled(x)
    if how == "pickle":
        copied = pickle.loads(pickle.dumps(compiled))
    elif how == "deepcopy":
        copied = copy.deepcopy(compiled)
    else:
        buffer = io.BytesIO()
        torch.save(compiled, buffer)
        buffer.seek(0)
        copied = torch.load(buffer, weights_only=False)
    assert type(copied) is type(compiled) and copied._orig_mod is not model
    assert copied._graphlift_options is compiled._graphlift_options  # the same settings
    assert list(copied.state_dict()) == list(compiled.state_dict())
    assert torch.equal(copied(x), copied._orig_mod(x)) and torch.equal(copied(x), model(x))
