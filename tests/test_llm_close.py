"""The llama.cpp model is freed explicitly (and at exit), never left to `Llama.__del__` at interpreter exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from expengine.config import LLMConfig
from expengine.models import llm


@pytest.mark.slow
def test_loaded_models_are_closed_explicitly_and_at_exit():
    config = LLMConfig(mode="model")
    model = llm.get_llm(config)
    assert isinstance(model, llm.LlamaCppLLM)
    freed: list[bool] = []
    model._model._stack.callback(lambda: freed.append(True))  # runs when llama.cpp frees the model
    llm.close_models()
    assert freed == [True] and llm._LOADED == {}
    assert llm.get_llm(config) is not model  # loads again when asked
    llm.close_models()
    code = "from expengine.config import LLMConfig; from expengine.models.llm import get_llm; get_llm(LLMConfig(mode='model'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
