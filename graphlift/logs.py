"""Logging artifacts: ``GRAPHLIFT_LOGS=recompiles,graph_breaks,guards,graph_code,bytecode``.

Each artifact is a child logger of ``graphlift`` (``graphlift.recompiles`` ...). An artifact that is
off costs one dict lookup at the call site, so callers test :func:`enabled` before building text.
Warnings (the recompile limit) always go to the ``graphlift`` logger at WARNING.
"""

from __future__ import annotations

import logging
import os

ARTIFACTS = ("recompiles", "graph_breaks", "guards", "graph_code", "bytecode")

log = logging.getLogger("graphlift")
_enabled: dict[str, bool] = dict.fromkeys(ARTIFACTS, False)
_handler: logging.Handler | None = None


def enabled(artifact: str) -> bool:
    """Whether ``artifact`` is being logged (cheap; check before formatting a message)."""
    return _enabled[artifact]


def emit(artifact: str, message: str) -> None:
    """Log ``message`` under ``artifact`` if that artifact is on."""
    if _enabled[artifact]:
        logging.getLogger(f"graphlift.{artifact}").info(message)


def set_logs(**artifacts: bool) -> None:
    """Turn artifacts on or off: ``set_logs(recompiles=True, guards=False)``.

    Unknown names raise ``ValueError`` listing the known ones.
    """
    for name, on in artifacts.items():
        if name not in _enabled:
            raise ValueError(f"unknown log artifact {name!r}; known: {', '.join(ARTIFACTS)}")
        _enabled[name] = bool(on)
        logging.getLogger(f"graphlift.{name}").setLevel(logging.INFO if on else logging.WARNING)
    if any(_enabled.values()):
        _ensure_handler()


def _ensure_handler() -> None:
    """Print to stderr unless the application configured logging itself (root has handlers)."""
    global _handler
    if _handler is None and not logging.getLogger().handlers:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[graphlift] %(message)s"))
        log.addHandler(_handler)
        log.propagate = False
    log.setLevel(logging.INFO)


def parse_env(value: str) -> dict[str, bool]:
    """``"recompiles,+guards,-bytecode"`` or ``"all"`` -> {artifact: on}."""
    result: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        on = not item.startswith("-")
        name = item.lstrip("+-")
        names = ARTIFACTS if name == "all" else (name,)
        result.update(dict.fromkeys(names, on))
    return result


def configure_from_env() -> None:
    """Apply ``GRAPHLIFT_LOGS`` from the environment (called once at import)."""
    value = os.environ.get("GRAPHLIFT_LOGS")
    if value:
        set_logs(**parse_env(value))
