"""`import lancedb` without loading the REST client of Lance namespaces, which a local store never uses.

lancedb imports `lance_namespace`, whose package imports the generated REST client
`lance_namespace_urllib3_client`: its package `__init__` loads every API class, the HTTP client and
urllib3 (about 0.45 s of CPU, half of `import lancedb`, paid by every process that writes the index:
an ingest, a cycle; a query reads through pylance and imports neither). Only
the client's `models` subpackage is needed to import lancedb. So before lancedb is first imported, the
client's package is put in `sys.modules` as an empty module that finds its submodules in the real
folder; its own `__init__` runs the first time anything asks the package for a name it defines (a
remote namespace), so nothing that uses it differs. Where the client is missing or already imported,
lancedb is imported as it is.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

REST_CLIENT = "lance_namespace_urllib3_client"


def defer_rest_client() -> bool:
    """Put the REST client's package in `sys.modules` without running its `__init__`; whether it did."""
    if REST_CLIENT in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(REST_CLIENT)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations or not spec.origin or not spec.has_location:
        return False
    package = types.ModuleType(REST_CLIENT)
    package.__spec__, package.__file__, package.__package__ = spec, spec.origin, REST_CLIENT
    package.__path__ = list(spec.submodule_search_locations)
    origin = spec.origin

    def run_init(name: str) -> Any:
        """PEP 562: called for a name the package lacks; runs the real `__init__` into it once."""
        del package.__getattr__  # type: ignore[attr-defined]
        with open(origin, encoding="utf-8") as fh:
            exec(compile(fh.read(), origin, "exec"), package.__dict__)
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {REST_CLIENT!r} has no attribute {name!r}") from None

    package.__getattr__ = run_init  # type: ignore[method-assign]
    sys.modules[REST_CLIENT] = package
    return True


def import_lancedb() -> Any:
    """The lancedb module, imported with its REST client deferred (`defer_rest_client`)."""
    if "lancedb" not in sys.modules:
        defer_rest_client()
    import lancedb

    return lancedb
