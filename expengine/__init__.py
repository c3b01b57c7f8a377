"""expengine: an offline experience engine for LLM agents. `from expengine import Engine`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ExpengineError, InputError, LockedError, ModelError, NotFoundError, StoreError

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .config import Config
    from .engine import Engine


def __getattr__(name: str):
    # Engine pulls in DuckDB; import it only when asked so `expengine --help` stays instant.
    if name == "Engine":
        from .engine import Engine

        return Engine
    if name == "Config":  # a hook's client path imports the package without the config's dataclasses
        from .config import Config

        return Config
    raise AttributeError(name)


__all__ = [
    "Engine",
    "Config",
    "ExpengineError",
    "InputError",
    "LockedError",
    "ModelError",
    "NotFoundError",
    "StoreError",
]
