"""A fleet: one root folder with one normal store per agent or tenant (`<root>/<name>/`).

The fleet commands drive `Engine` instances, one per store, on Ray (an optional extra: `pip install
'expengine[fleet]'`). This package sits above the engine and the service floors and below the CLI;
nothing below imports it. Ray itself is imported only inside the functions that need it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ..errors import InputError, NotFoundError
from ..store.db import DB_FILE

EXTRA_HINT = "pip install 'expengine[fleet]'"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def require_ray():
    """The `ray` module, or one clear error saying which extra to install."""
    try:
        import ray
    except ImportError:
        raise InputError(f"the fleet commands need Ray: {EXTRA_HINT}") from None
    return ray


def check_name(name: str) -> str:
    """A store name a request or a route may use: a plain folder name, never a path."""
    if not NAME.match(name) or name in (".", ".."):
        raise InputError(f"{name!r} is not a store name", hint="use letters, digits, '.', '_' and '-' (100 at most)")
    return name


def store_name(value: object) -> str:
    """The store a routing value (an agent, a session, a field) lands in: the value itself when it is a
    plain name, else its cleaned form plus a short hash, so two different values never share a store."""
    text = "" if value is None else str(value)
    if NAME.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:80].lstrip("._-") or "x"
    return f"{cleaned}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def fleet_stores(root: str | Path) -> dict[str, Path]:
    """The stores of a fleet root by name (folders holding a store database), sorted."""
    base = Path(root).expanduser()
    if not base.is_dir():
        raise NotFoundError(f"no fleet root at {base}", hint="pass --root DIR (a folder of store folders)")
    return {p.name: p for p in sorted(base.iterdir()) if p.is_dir() and NAME.match(p.name) and (p / DB_FILE).exists()}
