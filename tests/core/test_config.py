"""config.toml loading: every knob typed, errors name file/section/key, env overrides, secrets."""

import dataclasses
from pathlib import Path

import pytest

from ra_agent.config import Config, ConfigError, describe, load_config

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_shipped_config_loads_with_memo_defaults():
    cfg = load_config(ROOT / "config.toml", environ={})
    assert cfg.ingest.pubmed_batch == 200
    assert cfg.ingest.max_qps == 3.0
    assert cfg.clustering.min_samples == 8 and cfg.clustering.min_cluster_size == 30
    assert cfg.expansion.semantic.tau_start == 0.60 and cfg.expansion.semantic.delta_tau == 0.05
    assert cfg.expansion.upstream.alpha_coverage == 0.25 and cfg.expansion.upstream.max_parents == 30
    assert cfg.hardware.ram_reserve_bytes == 2 * 1024**3
    assert cfg.sr.min_eligible_trials == 6
    assert cfg.tokens.token_soft_cap == 9500


def test_shipped_config_sets_every_knob_explicitly():
    """config.toml must expose all knobs, not rely on hidden defaults."""
    import tomllib

    raw = tomllib.loads((ROOT / "config.toml").read_text())
    defaults = describe(Config())
    missing = []
    for dotted in defaults:
        if dotted == "secrets":
            continue
        node = raw
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            missing.append(dotted)
    assert missing == []


def test_shipped_values_equal_dataclass_defaults():
    shipped = describe(load_config(ROOT / "config.toml", environ={}))
    defaults = describe(Config())
    assert {k: v for k, v in shipped.items() if v != defaults[k]} == {}


def test_frozen():
    cfg = load_config(ROOT / "config.toml", environ={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.ingest.max_qps = 10  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[ingest]\nmax_qsp = 3\n", r"\[ingest\] unknown key 'max_qsp'"),
        ("[ingest]\npubmed_batch = 'many'\n", r"\[ingest\] pubmed_batch: expected an integer"),
        ("[ingest]\npubmed_batch = 0\n", r"\[ingest\] pubmed_batch: 0 is out of range"),
        ("[expansion.semantic]\ntau_start = 2.0\n", r"\[expansion.semantic\] tau_start: 2.0 is out of range"),
        ("[clustering]\nfeatures = 'graph'\n", r"\[clustering\] features: 'graph' is not one of"),
        ("[nonsense]\nx = 1\n", r"\[<top level>\] unknown key 'nonsense'"),
        ("[hardware]\ngpu_batch_halving = 1\n", r"gpu_batch_halving: expected true/false"),
        ("[ingest\n", r"not valid TOML"),
        ("[ingest]\napi_key = 'abc'\n", r"secrets are read from the environment"),
    ],
)
def test_bad_config_names_file_section_and_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_config(path, environ={})
    assert str(path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml", environ={})


def test_env_overrides_are_validated(tmp_path):
    path = write(tmp_path, "[ingest]\nmax_qps = 3\n")
    cfg = load_config(path, environ={"RA_INGEST__MAX_QPS": "5", "RA_EXPANSION__SEMANTIC__TAU_START": "0.55"})
    assert cfg.ingest.max_qps == 5.0
    assert cfg.expansion.semantic.tau_start == 0.55
    with pytest.raises(ConfigError, match=r"\[ingest\] max_qps: expected a number"):
        load_config(path, environ={"RA_INGEST__MAX_QPS": "fast"})
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        load_config(path, environ={"RA_INGEST__BOGUS": "1"})


def test_secrets_from_env_or_dotenv_never_shown(tmp_path):
    path = write(tmp_path, "")
    (tmp_path / ".env").write_text("NCBI_API_KEY=from-dotenv\nCROSSREF_MAILTO=me@example.org\n")
    cfg = load_config(path, environ={"NCBI_EMAIL": "env@example.org"})
    assert cfg.secrets.ncbi_api_key == "from-dotenv"
    assert cfg.secrets.ncbi_email == "env@example.org"
    assert cfg.secrets.crossref_mailto == "me@example.org"
    shown = repr(cfg) + str(describe(cfg))
    assert "from-dotenv" not in shown and "env@example.org" not in shown and "me@example.org" not in shown
    # the environment wins over .env
    assert load_config(path, environ={"NCBI_API_KEY": "env-key"}).secrets.ncbi_api_key == "env-key"


def test_data_dir_is_relative_to_the_config_file(tmp_path):
    path = write(tmp_path, '[workspace]\ndata_dir = "ws"\n')
    assert load_config(path, environ={}).data_dir == (tmp_path / "ws").resolve()


def test_with_overrides_validates():
    cfg = load_config(ROOT / "config.toml", environ={})
    assert cfg.with_overrides(ingest={"max_qps": 7}).ingest.max_qps == 7.0
    with pytest.raises(ConfigError, match="out of range"):
        cfg.with_overrides(ingest={"max_qps": -1})


def test_config_reference_doc_is_current():
    """docs/config.md is generated from config.toml (python scripts/config_doc.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("config_doc", ROOT / "scripts" / "config_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "config.md").read_text() == module.render((ROOT / "config.toml").read_text())
