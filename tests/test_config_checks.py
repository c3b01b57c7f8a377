"""config.toml and --set mistakes: exit 2 and one line naming the key and the fix; nothing silently ignored."""

from __future__ import annotations

import sys

import pytest

from expengine.cli import main
from expengine.config import Config
from expengine.errors import InputError


def run_main(monkeypatch, capsys, argv: list[str]) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["expengine", *argv])
    with pytest.raises(SystemExit) as stop:
        main()
    return stop.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    "toml, message",
    [
        ("ingest = 5\n", "config section [ingest] must be a table of keys, got int 5: write `[ingest]`"),
        ("[decayy]\ntheta_dormant = 0.3\n", "unknown config section [decayy]: did you mean [decay]?"),
        (
            "[decay]\ntheta_dormantt = 0.3\n",
            "unknown config key in [decay] 'theta_dormantt': did you mean 'theta_dormant'?",
        ),
        ("[decay]\ntheta_dormant = -5\n", "config key decay.theta_dormant must be at least 0, got -5"),
        ("[cluster]\nkeep_ratio = 1.5\n", "config key cluster.keep_ratio must be between 0.0 and 1.0, got 1.5"),
        ("[decay]\nlambda_by_category = { fact = 2.0 }\n", "config key decay.lambda_by_category must be between"),
        ('[llm]\nmode = "models"\n', "config key llm.mode must be one of auto, model, template, got 'models'"),
        ("[decay]\ntheta_dormant = nan\n", "config key decay.theta_dormant must be a finite number, got nan"),
        ("[decay]\ntheta_dormant = 1e999\n", "config key decay.theta_dormant must be a finite number, got inf"),
        ("[query]\nmin_similarity = 5\n", "config key query.min_similarity must be between 0 and 1, got 5.0"),
    ],
)
def test_a_config_file_mistake_is_exit_2_naming_key_and_fix(tmp_path, monkeypatch, capsys, toml, message):
    store = tmp_path / "store"
    store.mkdir()
    (store / "config.toml").write_text(toml, encoding="utf-8")
    code, err = run_main(monkeypatch, capsys, ["--store", str(store), "stats"])
    assert code == 2 and "Traceback" not in err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "setting, message",
    [
        ("ingest.max_line_bytes=-1", "config key ingest.max_line_bytes must be at least 1, got -1"),
        ("query.k=0", "config key query.k must be at least 1, got 0"),
        ("decay.theta_dormnt=0.3", "unknown config key in [decay] 'theta_dormnt': did you mean 'theta_dormant'?"),
        ("decayy.theta_dormant=0.3", "unknown config section [decayy]: did you mean [decay]?"),
    ],
)
def test_a_set_mistake_is_exit_2_naming_key_and_fix(tmp_path, monkeypatch, capsys, setting, message):
    code, err = run_main(monkeypatch, capsys, ["--store", str(tmp_path / "store"), "--set", setting, "stats"])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_every_default_is_within_its_range():
    assert Config.from_dict(Config().to_dict()) == Config()


def test_the_similarity_floor_is_per_encoder_and_one_number_means_every_encoder():
    query = Config().query
    assert query.similarity_floor("all-MiniLM-L6-v2") > query.similarity_floor("use-multilingual-v3") > 0
    assert query.similarity_floor("all-MiniLM-L6-v2+int8") == query.similarity_floor("all-MiniLM-L6-v2")
    assert query.similarity_floor("my-own-model") == 0.0  # not measured: never "nothing relevant"
    off = Config().with_overrides({"query.min_similarity": "0"}).query
    assert off.min_similarity == {"*": 0.0} and off.similarity_floor("all-MiniLM-L6-v2") == 0.0
    table = Config().with_overrides({"query.min_similarity": '{"my-own-model": 0.7}'}).query
    assert table.similarity_floor("my-own-model") == 0.7 and table.similarity_floor("all-MiniLM-L6-v2") == 0.0
    from_file = Config.from_dict({"query": {"min_similarity": 0.42}}).query  # a config.toml of before
    assert from_file.similarity_floor("use-multilingual-v3") == 0.42
    with pytest.raises(InputError, match="query.min_similarity must be a table of numbers"):
        Config.from_dict({"query": {"min_similarity": "high"}})
    with pytest.raises(InputError, match="query.min_similarity must be between 0 and 1"):
        Config().with_overrides({"query.min_similarity": '{"all-MiniLM-L6-v2": -0.1}'})
    # lexical evidence: measured for the multilingual encoder only, and read only under its cosine ceiling
    assert query.lexical_floor("use-multilingual-v3") > 0 == query.lexical_floor("all-MiniLM-L6-v2")
    assert query.similarity_floor("use-multilingual-v3") < query.lexical_ceiling("use-multilingual-v3") < 1
    assert query.lexical_ceiling("my-own-model") == 1.0  # a min_lexical set for it judges every query
    lexical = Config().with_overrides({"query.min_lexical": "0.05", "query.lexical_max_similarity": "0.4"}).query
    assert lexical.lexical_floor("use-multilingual-v3+int8") == 0.05 == lexical.lexical_floor("all-MiniLM-L6-v2")
    assert lexical.lexical_ceiling("use-multilingual-v3") == 0.4 == lexical.lexical_ceiling("all-MiniLM-L6-v2")


def test_a_config_toml_that_is_a_folder_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "store" / "config.toml").mkdir(parents=True)
    code, err = run_main(monkeypatch, capsys, ["--store", str(tmp_path / "store"), "stats"])
    assert code == 2 and "config.toml: Is a directory" in err and "Traceback" not in err, err
