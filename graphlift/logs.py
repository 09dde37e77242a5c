"""Logging artifacts: ``GRAPHLIFT_LOGS=recompiles,graph_breaks,guards,graph_code,bytecode``.

Each artifact is a child logger of ``graphlift`` (``graphlift.recompiles`` ...). An artifact that is
off costs one dict lookup at the call site, so callers test :func:`enabled` before building text.
``progress`` (compiles that take long, :mod:`graphlift.progress`) is an artifact too, and also
reaches an application that logs at INFO. Warnings (the recompile limit) always go to the
``graphlift`` logger at WARNING (:func:`warn`). Where the application has not configured logging,
graphlift prints to stderr with a ``[graphlift]`` prefix.
"""

from __future__ import annotations

import logging
import os

ENV_VAR = "GRAPHLIFT_LOGS"
ARTIFACTS = ("recompiles", "graph_breaks", "guards", "graph_code", "bytecode", "progress")

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


def warn(message: str) -> None:
    """Log a warning on the ``graphlift`` logger, always shown (with the prefix when graphlift
    prints it itself)."""
    _ensure_handler()
    log.warning(message)


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
    """Print to stderr unless the application configured logging itself (root has handlers).

    Levels are the artifacts' own: installing the handler turns nothing on.
    """
    global _handler
    if _handler is None and not logging.getLogger().handlers:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[graphlift] %(message)s"))
        log.addHandler(_handler)
        log.propagate = False


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
    """Apply ``GRAPHLIFT_LOGS`` from the environment (called once at import).

    A name that is no artifact raises ``ValueError`` naming the variable and the known names.
    """
    value = os.environ.get(ENV_VAR)
    if not value:
        return
    settings = parse_env(value)
    unknown = [name for name in settings if name not in _enabled]
    if unknown:
        raise ValueError(f"{ENV_VAR}={value!r}: unknown log artifact {unknown[0]!r}; known: "
                         f"{', '.join(ARTIFACTS)}, or all (-name turns one off)")
    set_logs(**settings)
