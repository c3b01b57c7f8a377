"""Starting and stopping Ray for one fleet command, and the worker-side model cache."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from . import require_ray

LOCAL_CPUS = 2
# one process per worker keeps its embedding model between the tasks Ray hands it (workers are reused)
_EMBEDDERS: dict[tuple[Any, ...], Any] = {}


@contextlib.contextmanager
def ray_session(address: str | None = None, *, num_cpus: int = LOCAL_CPUS) -> Iterator[Any]:
    """Ray for the block: the caller's when it is already up (a notebook, a test), else a cluster at
    `address`, else a local one with `num_cpus`; shut down at the end only if started here."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address:
        ray.init(address=address, **options)
    else:
        ray.init(num_cpus=num_cpus, **options)
    try:
        yield ray
    finally:
        ray.shutdown()


RETRIES = 3  # lost workers (killed, out of memory, a node gone) a store's task survives


def task_options(worker_env: dict[str, str] | None = None, retries: int = RETRIES) -> dict[str, Any]:
    """A fleet task's Ray options: one CPU, retried when its worker dies (the store lock, snapshot and
    content-hash ids make a retry safe), and `worker_env` in the worker's environment (cloud
    credentials, or a test's pause hook)."""
    options: dict[str, Any] = {"max_retries": retries, "num_cpus": 1}
    if worker_env:
        options["runtime_env"] = {"env_vars": dict(worker_env)}
    return options


def cached_embedder(config: Any) -> Any:
    """The embedder for a store's `[embedder]` config, made once per worker process (loaded on first use).
    On encoder `auto` an existing store's Engine embeds with the encoder of its vectors instead
    (`LazyEmbedder.following`, which leaves this one as it is for the worker's other stores)."""
    from ..models.embedder import LazyEmbedder

    key = (config.model_path, config.model, config.batch_size, config.encoder)
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = LazyEmbedder(
            config.model_path, batch_size=config.batch_size, model=config.model, encoder=config.encoder
        )
    return _EMBEDDERS[key]


def store_engine(path: str | Path, **options: Any) -> Any:
    """An `Engine` on one store of the fleet: the store's own config, and this process's cached model for it."""
    from ..config import Config
    from ..engine import Engine

    config = Config.load(Path(path))
    return Engine(store=path, config=config, embedder=cached_embedder(config.embedder), **options)


def error_text(exc: BaseException) -> str:
    """What a store's row says of a failure: an expengine error's own message, else its type and text."""
    from ..errors import ExpengineError

    return exc.message if isinstance(exc, ExpengineError) else f"{type(exc).__name__}: {exc}"


def bounded(ray: Any, calls: Iterable[Callable[[], Any]], max_parallel: int) -> Iterator[tuple[int, Any]]:
    """Start each call (it returns an ObjectRef) with at most `max_parallel` in flight; yield (index,
    value or the exception Ray raised) as each finishes, so one failure never hides the others."""
    pending = iter(enumerate(calls))
    running: dict[Any, int] = {}

    def top_up() -> None:
        while len(running) < max(1, max_parallel):
            nxt = next(pending, None)
            if nxt is None:
                return
            running[nxt[1]()] = nxt[0]

    top_up()
    while running:
        done, _ = ray.wait(list(running), num_returns=1)
        index = running.pop(done[0])
        try:
            value = ray.get(done[0])
        except Exception as exc:  # a task that crashed past its retries, or a lost object
            value = exc
        yield index, value
        top_up()
