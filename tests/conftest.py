"""Every test starts and ends with an empty cache, default settings and every log artifact off.

One setting differs from its default: graphlift's own errors raise (``raise_internal_errors``),
so that no test passes because a frame quietly fell back to eager. Tests of that fallback turn
it off themselves.

torch.compile never runs in the suite's processes: its first call changes torch for the whole
process (``torch.distributions`` validation off, optimizers' ``_init_group`` wrapped), and every
later test would test graphlift on a torch no user has. A test that leaves those marks fails;
torch.compile's figures come from its recording (``tests/reference``).

Under pytest-xdist (``make test``), the tests of the modules in ``STARTS_PROCESSES`` go to one
worker (``--dist loadgroup``): each starts processes of its own (distributed ranks, a second
interpreter for warm start, the CLI), which would otherwise overlap on the two cores.
"""

import pytest
import torch

import graphlift
from graphlift import logs
from graphlift.graph_break import listeners

# Modules whose tests start processes of their own.
STARTS_PROCESSES = {"test_cpython_suite", "test_demo", "test_distributed", "test_doctor",
                    "test_dropin", "test_import_time", "test_recompiles",
                    "test_structured_trace", "test_warm_start", "test_workloads"}
_INIT_GROUP = torch.optim.SGD._init_group


def pytest_collection_modifyitems(items):
    for item in items:
        if getattr(item.module, "__name__", None) in STARTS_PROCESSES:
            item.add_marker(pytest.mark.xdist_group("starts_processes"))


def torch_compile_has_run() -> bool:
    """Whether torch.compile's first call has changed torch in this process."""
    return (torch.distributions.Distribution._validate_args is not True
            or torch.optim.SGD._init_group is not _INIT_GROUP)


def _clean() -> None:
    graphlift.reset()
    graphlift.config.reset_to_defaults()
    graphlift.config.raise_internal_errors = True
    graphlift.set_logs(**dict.fromkeys(logs.ARTIFACTS, False))


@pytest.fixture(autouse=True)
def clean_graphlift():
    _clean()
    yield
    _clean()
    assert not torch_compile_has_run(), \
        "torch.compile ran in the suite's process: record its figures instead (tests/reference)"


@pytest.fixture
def breaks() -> list:
    """The graph breaks of the test, as graphlift reports them to its listeners."""
    seen: list = []
    listeners.append(seen.append)
    yield seen
    listeners.remove(seen.append)
