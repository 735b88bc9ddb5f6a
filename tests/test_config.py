"""Tests for pipeline/config.py: params.yaml checks, hparams resolution, the shipped table.

Bad input must give a ConfigError whose message is one line, names the key at fault and the
values it may take, and is raised before any stage does work.
"""
from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PROJECT_ROOT, SHIPPED_PARAMS, shipped_params_text, with_variants_in_selection, write_params
from pipeline import config
from pipeline.models import BASELINES, REGISTRY
from pipeline.config import ConfigError

SPEC = PROJECT_ROOT / "docs" / "SPEC.md"  # the in-repository copy of the specification
BASE = SHIPPED_PARAMS


def assert_one_line(err: ConfigError, *fragments: str) -> str:
    """The message is a single line and contains every fragment."""
    message = str(err)
    assert "\n" not in message and "\r" not in message, message
    assert message.strip(), "empty message"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def params_with(**changes) -> dict:
    return with_variants_in_selection(copy.deepcopy(BASE), **changes)


def load(workdir: Path, params: dict) -> dict:
    write_params(workdir, params)
    return config.load_params()


# ------------------------------------------------------------------- load_params: bad input

ALL_DATASETS = list(config.DATASETS)
RANGE_MSGS = {"beta": "[0, 1]", "K": "integer >= 1", "epochs": "integer >= 1", "lr": "> 0"}

BAD_TOP_LEVEL = [
    # (id, changes, key named in the message, fragments of the allowed values)
    ("unknown-dataset", {"datasets": ["cora", "coraa"]}, "datasets", ALL_DATASETS),
    ("unknown-method", {"methods": ["cadnet", "gcnn"]}, "methods", ["cadnet", "cadnet_pull", "gcn"]),
    ("beta-1.5", {"beta": 1.5}, "beta", ["[0, 1]"]),
    ("beta-neg", {"beta": -0.1}, "beta", ["[0, 1]"]),
    ("K-0", {"K": 0}, "K", ["an integer in [1, 1000]"]),
    ("K-2.5", {"K": 2.5}, "K", ["an integer in [1, 1000]"]),
    ("K-bool", {"K": True}, "K", ["an integer in [1, 1000]"]),
    ("epochs-0", {"epochs": 0}, "epochs", ["an integer in [1, 100000]"]),
    ("epochs-neg", {"epochs": -1}, "epochs", ["an integer in [1, 100000]"]),
    ("lr-0", {"lr": 0}, "lr", ["a number in (0, 10]"]),
    ("lr-neg", {"lr": -0.01}, "lr", ["a number in (0, 10]"]),
    ("dropout-site", {"dropout_sites": ["input", "output"]}, "dropout_sites", ["input", "hidden", "logits"]),
    ("direction", {"direction": "sideways"}, "direction", ["push", "pull"]),
    ("split", {"split": "random"}, "split", ["public", "per_class"]),
    ("p_drop-1", {"p_drop": 1.0}, "p_drop", ["[0, 1)"]),
    ("normalize-1", {"normalize_features": 1}, "normalize_features", ["false or one of", "clamped_sum", "sum"]),
    ("normalize-true", {"normalize_features": True}, "normalize_features", ["clamped_sum"]),
    ("runs-0", {"runs": 0}, "runs", ["an integer in [1, 10000]"]),
    ("runs-str", {"runs": "100"}, "runs", ["an integer in [1, 10000]"]),
    ("runs-huge", {"runs": 10**12}, "runs", ["an integer in [1, 10000]"]),
    ("device", {"device": "tpu"}, "device", ["auto", "cpu", "cuda"]),
    ("n_jobs-0", {"n_jobs": 0}, "n_jobs", ["non-zero integer"]),
    ("chunk_workers-0", {"chunk_workers": 0}, "chunk_workers", ["non-zero integer"]),
]
# keys of the training engine, when this version of config.py knows them
if hasattr(config, "ENGINES"):
    BAD_TOP_LEVEL += [
        ("engine", {"engine": "fast"}, "engine", list(config.ENGINES)),
        ("seed_chunk-0", {"seed_chunk": 0}, "seed_chunk", ["auto", "an integer >= 1"]),
        ("seed_chunk-str", {"seed_chunk": "many"}, "seed_chunk", ["auto", "an integer >= 1"]),
        ("memory_budget_gb-0", {"memory_budget_gb": 0}, "memory_budget_gb", ["a number > 0"]),
    ]


@pytest.mark.parametrize("changes, key, allowed", [c[1:] for c in BAD_TOP_LEVEL],
                         ids=[c[0] for c in BAD_TOP_LEVEL])
def test_load_params_rejects_bad_top_level_value(workdir, changes, key, allowed):
    with pytest.raises(ConfigError) as info:
        load(workdir, params_with(**changes))
    message = assert_one_line(info.value, *allowed)
    assert message.startswith(f"{key}:"), message
    # the bad value itself is shown
    bad = changes[key]
    shown = bad[-1] if isinstance(bad, list) and key in ("datasets", "methods") else bad
    assert repr(shown) in message or str(shown) in message, message


def test_empty_dataset_selection_is_rejected(workdir):
    with pytest.raises(ConfigError) as info:
        load(workdir, params_with(datasets=[]))
    assert_one_line(info.value, "datasets")


def test_missing_params_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, "params.yaml", "not found")


def test_unknown_dataset_row_in_hparams_table(workdir):
    params = params_with()
    params["hparams"]["coraa"] = copy.deepcopy(params["hparams"]["cora"])
    with pytest.raises(ConfigError) as info:
        load(workdir, params)
    assert_one_line(info.value, "hparams", "coraa", *ALL_DATASETS)


# ------------------------------------------------------------ hparams_for: per-dataset rows

BAD_ROW = [
    ("beta-1.5", "beta", 1.5, "[0, 1]"),
    ("beta-neg", "beta", -0.1, "[0, 1]"),
    ("K-0", "K", 0, "an integer in [1, 1000]"),
    ("K-2.5", "K", 2.5, "an integer in [1, 1000]"),
    ("K-huge", "K", 10**6, "an integer in [1, 1000]"),
    ("epochs-0", "epochs", 0, "an integer in [1, 100000]"),
    ("epochs-neg", "epochs", -1, "an integer in [1, 100000]"),
    ("epochs-huge", "epochs", 10**9, "an integer in [1, 100000]"),
    ("hidden-huge", "hidden", 10**12, "an integer in [1, 65536]"),
    ("lr-0", "lr", 0, "a number in (0, 10]"),
    ("lr-neg", "lr", -0.01, "a number in (0, 10]"),
    ("dropout-site", "dropout_sites", ["input", "output"], "logits"),
    ("direction", "direction", "sideways", "pull"),
    ("self_loops-str", "self_loops", "yes", "true or false"),
]


@pytest.mark.parametrize("key, value, allowed", [c[1:] for c in BAD_ROW], ids=[c[0] for c in BAD_ROW])
def test_hparams_for_rejects_bad_dataset_value(workdir, key, value, allowed):
    params = params_with()
    params["hparams"]["cora"][key] = value
    loaded = load(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.hparams_for(loaded, "cora")
    message = assert_one_line(info.value, allowed)
    assert message.startswith(f"hparams.cora.{key}:"), message
    # another dataset's row is untouched and still resolves
    assert config.hparams_for(loaded, "citeseer")["beta"] == 0.7


def test_unknown_key_in_dataset_row(workdir):
    params = params_with()
    params["hparams"]["cora"]["betta"] = 0.9
    loaded = load(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.hparams_for(loaded, "cora")
    message = assert_one_line(info.value, "hparams.cora.betta", "unknown key", "beta", "dropout_sites")
    assert message.startswith("hparams.cora.betta:")


def test_missing_key_in_dataset_row(workdir):
    params = params_with()
    del params["hparams"]["cora"]["K"]
    loaded = load(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.hparams_for(loaded, "cora")
    assert_one_line(info.value, "hparams.cora.K", "missing")
    # ... unless a global override supplies it
    loaded["K"] = 3
    assert config.hparams_for(loaded, "cora")["K"] == 3


def test_hparams_for_unknown_dataset_and_method(workdir):
    loaded = load(workdir, params_with())
    with pytest.raises(ConfigError) as info:
        config.hparams_for(loaded, "coraa")
    assert_one_line(info.value, "dataset", "coraa", *ALL_DATASETS)
    with pytest.raises(ConfigError) as info:
        config.hparams_for(loaded, "cora", "gcnn")
    assert_one_line(info.value, "method", "gcnn", "cadnet", "cadnet_pull")


# -------------------------------------------------------------------------- positive cases


def test_shipped_params_load_and_every_row_resolves(tmp_path):
    (tmp_path / "params.yaml").write_text(shipped_params_text())
    params = config.load_params(tmp_path / "params.yaml")
    assert set(params["datasets"]) <= set(config.DATASETS)
    # every registry method is selected and trained by one of the studies of Tables 2 and 3,
    # and has its own keys' entry
    studies = params["studies"]
    assert set(params["methods"]) == set(config.METHODS)
    assert {m for name in config.TABLE_STUDIES for m in studies[name]["methods"]} == set(config.METHODS)
    assert set(studies["baselines"]["methods"]) <= set(BASELINES)
    assert set(params["method_hparams"]) == set(config.METHODS)  # mixhop_l2's too: its stage lists it
    assert set(params["hparams"]) == set(config.DATASETS)
    for key in config.TABLE_RULES:  # every override exists (dvc exp run -S needs the key) ...
        assert key in params and params[key] is None, key  # ... and is off in the shipped file
    for dataset in config.DATASETS:
        for method in config.METHODS:
            hp = config.hparams_for(params, dataset, method)
            assert set(hp) <= set(config.HPARAM_RULES)
            if method in BASELINES or REGISTRY[method].hparams_of in BASELINES:
                assert hp["baseline"] == (REGISTRY[method].hparams_of or method) and "beta" not in hp
            else:
                assert set(config.TABLE_RULES) <= set(hp) and {"transition", "propagation", "weighting"} <= set(hp)


def test_load_params_accepts_explicit_path(tmp_path):
    params = copy.deepcopy(SHIPPED_PARAMS)
    params["runs"] = 7
    target = tmp_path / "elsewhere.yaml"
    target.write_text(yaml.safe_dump(params))
    assert config.load_params(target)["runs"] == 7


def test_global_override_applies_to_every_dataset(workdir):
    loaded = load(workdir, params_with(beta=0.9))
    for dataset in config.DATASETS:
        assert config.hparams_for(loaded, dataset)["beta"] == 0.9
    # other keys keep each dataset's value
    assert config.hparams_for(loaded, "cora")["K"] == 6
    assert config.hparams_for(loaded, "pubmed")["K"] == 8


def test_per_dataset_value_used_without_override(workdir):
    params = params_with()
    params["hparams"]["cora"]["beta"] = 0.95
    loaded = load(workdir, params)
    assert config.hparams_for(loaded, "cora")["beta"] == 0.95
    assert config.hparams_for(loaded, "citeseer")["beta"] == 0.7
    # a global override beats the row
    loaded["beta"] = 0.6
    assert config.hparams_for(loaded, "cora")["beta"] == 0.6


def test_methods_fix_direction(workdir):
    loaded = load(workdir, params_with())
    assert config.hparams_for(loaded, "cora", "cadnet")["direction"] == "push"
    assert config.hparams_for(loaded, "cora", "cadnet_pull")["direction"] == "pull"
    # the method is applied after the global override
    loaded["direction"] = "push"
    assert config.hparams_for(loaded, "cora", "cadnet_pull")["direction"] == "pull"
    loaded["direction"] = "pull"
    assert config.hparams_for(loaded, "cora", "cadnet")["direction"] == "pull"
    # the rest of the row is the same for both methods
    push = config.hparams_for(loaded, "photo", "cadnet")
    pull = config.hparams_for(loaded, "photo", "cadnet_pull")
    assert {k: v for k, v in push.items() if k != "direction"} == {k: v for k, v in pull.items() if k != "direction"}


def test_fingerprint_is_stable_and_sensitive():
    hp = {"beta": 0.8, "K": 6}
    assert config.fingerprint("cora", hp) == config.fingerprint("cora", dict(reversed(hp.items())))
    assert config.fingerprint("cora", hp) != config.fingerprint("cora", {**hp, "beta": 0.9})
    assert re.fullmatch(r"[0-9a-f]{16}", config.fingerprint("cora", hp))


# ------------------------------------------------------------------ the table vs. SPEC.md

SPEC_COLUMNS = ["citeseer", "cora", "pubmed", "computers", "photo", "cs", "physics"]


def spec_table() -> dict[str, dict[str, str]]:
    """SPEC.md's "Hyperparameters" table as {row label: {dataset: cell}}."""
    text = SPEC.read_text()
    section = text.split("## Hyperparameters", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    table = {}
    for line in rows[2:]:  # skip the header and the |---| line
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        table[cells[0]] = dict(zip(SPEC_COLUMNS, cells[1:]))
    return table


def expected_row(spec: dict[str, dict[str, str]], dataset: str) -> dict:
    def cell(label):
        return spec[label][dataset]

    layers, hidden = (int(v) for v in cell("layers / hidden").split("/"))
    assert layers == 2
    drop = cell("lr drop (every/factor)")
    window = cell("early stop window")
    row = {
        "hidden": hidden,
        "leak_slope": float(cell("leak-slope")),
        "p_drop": float(cell("p_drop")),
        "K": int(cell("K")),
        "beta": float(cell("beta")),
        "self_loops": {"yes": True, "no": False}[cell("self-loop")],
        "epochs": int(cell("epochs")),
        "lr": float(cell("initial lr")),
        "weight_decay": float(cell("weight decay")),
        "lambda_ent": float(cell("lambda_ent")),
        "early_stop_window": 0 if window == "-" else int(window),
        "lr_drop_every": 0 if drop == "-" else int(drop.split("/")[0]),
    }
    if drop != "-":
        row["lr_drop_factor"] = float(drop.split("/")[1])
    return row


# SPEC "Dropout sites": CiteSeer input+hidden+logits, Cora input+logits, PubMed input+hidden,
# Amazon and Coauthor input+hidden. Split: public for citation data, per_class (20 / 30) else.
SPEC_DROPOUT = {
    "citeseer": ["input", "hidden", "logits"], "cora": ["input", "logits"], "pubmed": ["input", "hidden"],
    "computers": ["input", "hidden"], "photo": ["input", "hidden"], "cs": ["input", "hidden"],
    "physics": ["input", "hidden"],
}
SPEC_SPLIT = {d: "public" if d in ("citeseer", "cora", "pubmed") else "per_class" for d in SPEC_COLUMNS}


@pytest.mark.parametrize("dataset", SPEC_COLUMNS)
def test_shipped_table_matches_spec(dataset):
    spec = spec_table()
    assert len(spec) == 12, sorted(spec)  # the parse found every row of the table
    row = BASE["hparams"][dataset]
    expected = expected_row(spec, dataset)
    got = {k: row[k] for k in expected}
    assert got == pytest.approx(expected), dataset
    assert row["dropout_sites"] == SPEC_DROPOUT[dataset]
    assert row["split"] == SPEC_SPLIT[dataset]
    assert row["direction"] == "push"  # the authors' code; cadnet_pull gives the paper's Eq.
    assert row["normalize_features"] == "clamped_sum"  # PyG 1.3.2's rule, which the authors ran
    if SPEC_SPLIT[dataset] == "per_class":
        assert (row["train_per_class"], row["val_per_class"]) == (20, 30)


def test_spec_cora_and_photo_rows_spelled_out():
    """Two rows written out by hand, independent of the SPEC parser above."""
    cora = BASE["hparams"]["cora"]
    assert cora == {
        "hidden": 64, "leak_slope": 0.05, "p_drop": 0.5, "dropout_sites": ["input", "logits"], "K": 6,
        "beta": 0.8, "direction": "push", "self_loops": True, "normalize_features": "clamped_sum", "epochs": 100,
        "lr": 0.01, "lr_drop_every": 50, "lr_drop_factor": 0.5, "weight_decay": 5e-4, "lambda_ent": 0.5,
        "early_stop_window": 10, "split": "public", "train_per_class": 20, "val_per_class": 30,
    }
    photo = BASE["hparams"]["photo"]
    assert photo == {
        "hidden": 64, "leak_slope": 0.15, "p_drop": 0.5, "dropout_sites": ["input", "hidden"], "K": 2,
        "beta": 0.95, "direction": "push", "self_loops": True, "normalize_features": "clamped_sum", "epochs": 300,
        "lr": 0.05, "lr_drop_every": 0, "lr_drop_factor": 0.5, "weight_decay": 2e-7, "lambda_ent": 0.1,
        "early_stop_window": 20, "split": "per_class", "train_per_class": 20, "val_per_class": 30,
    }


# ------------------------------------------------------- stages fail before doing any work


def _files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("stage, argv", [
    ("train", ["cora"]), ("train", ["cora", "cadnet_pull"]), ("stats", []), ("plot", []), ("curves", []),
])
def test_stages_reject_bad_override_before_work(workdir, stage, argv):
    import importlib

    module = importlib.import_module(f"pipeline.{stage}")
    write_params(workdir, params_with(beta=1.5))
    before = _files_under(workdir)
    with pytest.raises(ConfigError) as info:
        module.main(argv)
    assert_one_line(info.value, "beta", "[0, 1]")
    assert _files_under(workdir) == before


@pytest.mark.parametrize("stage", ["train", "evaluate"])
@pytest.mark.parametrize("argv", [["coraa"], ["cora", "gcnn"], ["cora", "cadnet", "extra"], []])
def test_cell_stages_reject_bad_or_extra_arguments(workdir, stage, argv):
    import importlib

    with pytest.raises(ConfigError) as info:
        importlib.import_module(f"pipeline.{stage}").main(argv)
    assert_one_line(info.value, *argv[-1:], *(["unexpected argument"] if len(argv) > 2 else []))
    assert not (workdir / "data").exists()


# ------------------------------------------------------------------- params.yaml as a file

@pytest.mark.parametrize("text, fragments", [
    ("datasets: [cora, citeseer\nmethods: [cadnet]\n", ["params.yaml:", "not valid YAML"]),
    ("datasets:\n  - cora\n methods: x\n", ["params.yaml:3", "not valid YAML"]),
    ("datasets:\n\t- cora\n", ["params.yaml:2", "not valid YAML", "spaces"]),
    ("runs: 2\nruns: 3\n", ["runs", "written twice", "lines 1 and 2"]),
    ("hparams:\n  cora:\n    beta: 0.8\n    beta: 0.9\n", ["beta", "written twice", "lines 3 and 4"]),
    ("- cora\n- citeseer\n", ["params.yaml", "mapping"]),
], ids=["unclosed-bracket", "bad-indent", "tab", "duplicate-top-level-key", "duplicate-nested-key", "a-list"])
def test_a_broken_params_file_is_one_line_naming_file_and_line(workdir, text, fragments):
    (workdir / "params.yaml").write_text(text)
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, *fragments)


def test_params_that_are_not_utf8_are_one_line_naming_the_line(workdir):
    (workdir / "params.yaml").write_bytes(shipped_params_text().encode() + b"runs: 1\xff0\n")
    with pytest.raises(ConfigError) as info:
        config.load_params()
    line = shipped_params_text().count("\n") + 1
    assert_one_line(info.value, f"params.yaml:{line}", "not UTF-8", "0xff")


def test_a_stage_command_shows_a_broken_params_file_as_one_line(workdir):
    (workdir / "params.yaml").write_text("datasets: [cora\n")
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run([sys.executable, "-m", "pipeline.check"], cwd=workdir, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: params.yaml:"), proc.stderr


@pytest.mark.parametrize("key, value", [
    ("datasets", "cora"), ("datasets", 3), ("datasets", ""), ("datasets", ["cora", "cora"]),
    ("methods", "cadnet"), ("methods", ["cadnet", "cadnet"]),
])
def test_a_selection_that_is_not_a_list_of_distinct_names_names_its_key(workdir, key, value):
    write_params(workdir, {**params_with(datasets=["cora"], methods=["cadnet"]), key: value})
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, f"{key}:", *(["twice"] if isinstance(value, list) else ["list"]))


@pytest.mark.parametrize("study", ["variants", "baselines"])
@pytest.mark.parametrize("key, value", [("datasets", "cora"), ("methods", "gcn"), ("datasets", ["cora", "cora"])])
def test_a_studys_selection_is_a_list_of_distinct_names(workdir, study, key, value):
    params = params_with(datasets=["cora"])
    params["studies"][study] = {**params["studies"][study], key: value}
    write_params(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, f"studies.{study}.{key}")


def test_train_cli_rejects_bad_beta_without_touching_data(workdir):
    params = params_with(beta=1.5, datasets=["cora"], methods=["cadnet"], runs=2)
    write_params(workdir, params)
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run([sys.executable, "-m", "pipeline.train", "cora"], cwd=workdir, env=env,
                          capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "beta" in lines[0] and "[0, 1]" in lines[0], lines[0]
    assert not (workdir / "data").exists()
    assert sorted(p.name for p in workdir.iterdir()) == ["params.yaml"]


# -------------------------------------------------------------------------- methods and studies


def test_registry_entries_fix_what_defines_them(workdir):
    loaded = load(workdir, params_with())
    cases = {  # method -> (key, value) its entry fixes whatever params.yaml says
        "cadnet": ("transition", "cad"), "rw": ("transition", "rw"), "rw_pull": ("direction", "pull"),
        "symna": ("transition", "symna"), "ppr": ("propagation", "ppr"), "hk": ("propagation", "heat"),
        "gat_rw": ("transition", "gat"), "tf_rw": ("transition", "tf"), "cad": ("beta", 1.0),
        "cadnet_noent": ("lambda_ent", 0.0),
    }
    for method, (key, value) in cases.items():
        assert config.hparams_for(loaded, "cora", method)[key] == value, method
    assert config.hparams_for(loaded, "cora", "rw")["weighting"] == "none"
    assert config.hparams_for(loaded, "cora", "cadnet")["weighting"] == "adaptive"
    loaded["beta"] = 0.6  # a global override reaches CAD-Net but not what `cad` fixes
    assert config.hparams_for(loaded, "cora", "cadnet")["beta"] == 0.6
    assert config.hparams_for(loaded, "cora", "cad")["beta"] == 1.0


def test_method_own_keys_default_and_per_dataset(workdir):
    params = params_with()
    params["method_hparams"]["ppr"]["cora"] = {"ppr_alpha": 0.2}
    loaded = load(workdir, params)
    assert config.hparams_for(loaded, "cora", "ppr")["ppr_alpha"] == 0.2
    assert config.hparams_for(loaded, "citeseer", "ppr")["ppr_alpha"] == 0.05
    assert "ppr_alpha" not in config.hparams_for(loaded, "cora", "rw")


def test_a_cells_own_seed_chunk_reaches_that_cell_alone_and_is_checked(workdir):
    params = params_with()
    params["method_hparams"]["mixhop"]["pubmed"] = {**params["method_hparams"]["mixhop"].get("pubmed", {}), "seed_chunk": 5}
    loaded = load(workdir, params)
    assert config.hparams_for(loaded, "pubmed", "mixhop")["seed_chunk"] == 5
    assert "seed_chunk" not in config.hparams_for(loaded, "cora", "mixhop")  # the global one there
    params["method_hparams"]["mixhop"]["pubmed"]["seed_chunk"] = 0
    with pytest.raises(ConfigError) as info:
        config.hparams_for(load(workdir, params), "pubmed", "mixhop")
    assert_one_line(info.value, "method_hparams.mixhop.pubmed.seed_chunk", "0", "integer >= 1")


@pytest.mark.parametrize("own, message", [
    ({"ppr_alpha": 1.5, "diffusion_topk": 128}, ["method_hparams.ppr.ppr_alpha", "1.5", "(0, 1)"]),
    ({"ppr_alpha": 0.05}, ["method_hparams.ppr.diffusion_topk", "missing"]),
    ({"ppr_alpha": 0.05, "diffusion_topk": 128, "heat_t": 5}, ["method_hparams.ppr.heat_t", "unknown key"]),
    ({"ppr_alpha": 0.05, "diffusion_topk": 128, "cora": {"alpha": 1}}, ["method_hparams.ppr.cora.alpha"]),
])
def test_method_own_keys_are_checked(workdir, own, message):
    params = params_with()
    params["method_hparams"]["ppr"] = own
    loaded = load(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.hparams_for(loaded, "cora", "ppr")
    assert_one_line(info.value, *message)


@pytest.mark.parametrize("key, value, message", [
    ("optimizer", "rmsprop", ["method_hparams.mixhop.optimizer", "rmsprop", "sgd"]),
    ("hidden_per_power", [20, 20], ["method_hparams.mixhop.hidden_per_power", "3 integers"]),
    ("output_per_power", [0, 0, 0], ["method_hparams.mixhop.output_per_power", "not all 0"]),
    ("lr_decrement", 1.0, ["method_hparams.mixhop.lr_decrement", "[0, 1)"]),
    ("hidden", 60, ["method_hparams.mixhop.hidden", "unknown key"]),
])
def test_mixhop_own_keys_are_checked(workdir, key, value, message):
    params = params_with()
    params["method_hparams"]["mixhop"][key] = value
    loaded = load(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.hparams_for(loaded, "citeseer", "mixhop")  # which takes the defaults of these keys
    assert_one_line(info.value, *message)


def test_mixhop_l2_reads_mixhops_settings_but_fixes_its_lasso_to_zero(workdir):
    """mixhop_l2 is MixHop with L2 alone on its kernels: every setting from method_hparams.mixhop
    (its per-dataset rows too), but the lasso held at 0 whatever that block says."""
    params = params_with()
    params["method_hparams"]["mixhop"]["citeseer"] = {**params["method_hparams"]["mixhop"]["citeseer"],
                                                      "kernel_lasso": 0.3, "lr": 0.125}
    loaded = load(workdir, params)
    mixhop, l2_only = (config.hparams_for(loaded, "citeseer", m) for m in ("mixhop", "mixhop_l2"))
    assert mixhop["kernel_lasso"] == 0.3 and l2_only["kernel_lasso"] == 0.0
    assert l2_only["lr"] == 0.125 and l2_only["baseline"] == "mixhop"
    assert {k: v for k, v in l2_only.items() if k != "kernel_lasso"} == {k: v for k, v in mixhop.items() if k != "kernel_lasso"}
    params["method_hparams"]["mixhop_l2"] = {"lr": 0.5, "citeseer": {"epochs": 200}}  # its own values win
    loaded = load(workdir, params)
    l2_only = config.hparams_for(loaded, "citeseer", "mixhop_l2")
    assert (l2_only["lr"], l2_only["epochs"], l2_only["kernel_lasso"]) == (0.5, 200, 0.0)
    assert config.hparams_for(loaded, "cora", "mixhop_l2")["epochs"] == 400
    assert config.hparams_for(loaded, "citeseer", "mixhop")["lr"] == 0.125  # MixHop's own untouched
    for block, message in (({"kernel_lasso": 0.1}, ["method_hparams.mixhop_l2.kernel_lasso", "unknown key"]),
                           ({"citeseer": {"lr": -1}}, ["method_hparams.mixhop_l2.citeseer.lr", "-1"])):
        params["method_hparams"]["mixhop_l2"] = block
        with pytest.raises(ConfigError) as info:
            config.hparams_for(load(workdir, params), "citeseer", "mixhop_l2")
        assert_one_line(info.value, *message)
    params["method_hparams"]["mixhop_l2"] = {}
    params["method_hparams"]["mixhop"]["citeseer"]["p_drop"] = 1.5  # a bad value in the block it reads
    with pytest.raises(ConfigError) as info:
        config.hparams_for(load(workdir, params), "citeseer", "mixhop_l2")
    assert_one_line(info.value, "method_hparams.mixhop.citeseer.p_drop", "1.5")


@pytest.mark.parametrize("variants, message", [
    ({"datasets": ["cora"], "methods": ["cadnet"], "runs": {}}, ["studies.variants.methods", "cadnet", "studies.main"]),
    ({"datasets": ["cora"], "methods": ["gcnn"], "runs": {}}, ["studies.variants.methods", "gcnn", "rw"]),
    ({"datasets": ["cora"], "methods": ["rw"], "runs": {"cora": -1}}, ["studies.variants.runs.cora", "[0, 10000]"]),
    ({"datasets": ["cora"], "methods": ["rw"], "runs": "5"}, ["studies.variants.runs", "map a dataset"]),
    ({"datasets": ["cora"], "methods": ["rw"], "runs": {"cora": {"rw": -1}}},
     ["studies.variants.runs.cora.rw", "an integer in [0, 10000]", "0: not run"]),
    ({"datasets": ["cora"], "methods": ["rw"], "runs": {"cora": {"gcnn": 5}}}, ["studies.variants.runs.cora", "'gcnn'", "rw"]),
    ({"datasets": ["cora"], "methods": ["rw"], "seeds": 5}, ["studies.variants", "datasets, methods, runs, settings, grid"]),
    ({"methods": ["rw"]}, ["studies.variants.datasets", "missing"]),
])
def test_a_study_is_checked(workdir, variants, message):  # noqa: D103
    params = params_with(datasets=["cora"], methods=["cadnet"])
    params["studies"]["variants"] = variants
    write_params(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, *message)


@pytest.mark.parametrize("studies, message", [
    ({}, ["studies", "must map"]),
    ([], ["studies", "must map"]),
    ({"Beta": {"datasets": [], "methods": []}}, ["studies", "'Beta'", "lower-case"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "grid": {"betta": [0.5]}}}, ["studies.b.grid", "betta", "beta"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "grid": {"beta": [1.5]}}}, ["studies.b.grid.beta", "1.5", "[0, 1]"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "grid": {"beta": 0.5}}}, ["studies.b.grid.beta", "non-empty list"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "grid": {"beta": []}}}, ["studies.b.grid.beta", "non-empty list"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "grid": {"beta": [0.5, 0.5]}}}, ["studies.b.grid.beta", "twice"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "grid": {"self_loops": [True]}}}, ["studies.b.grid", "self_loops"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "grid": {"dropout_sites": [["input"]]}}},
     ["studies.b.grid.dropout_sites", "a number or a name"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "grid": ["beta"]}}, ["studies.b.grid", "must map"]),
    ({"b": {"datasets": ["cora"], "methods": ["cadnet"], "runs": 10001}}, ["studies.b.runs", "[0, 10000]"]),
])
def test_bad_studies_are_one_line_naming_the_key(workdir, studies, message):
    params = params_with(datasets=["cora"], methods=["cadnet"])
    params["studies"] = studies
    write_params(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, *message)


@pytest.mark.parametrize("method, key, message", [
    ("gcn", "beta", ["studies.b.grid.beta", "not a setting of gcn"]),
    ("cad", "beta", ["studies.b.grid.beta", "fixed by cad's registry entry"]),
])
def test_a_grid_sets_only_what_a_method_has_and_its_entry_leaves_free(workdir, method, key, message):
    params = params_with(datasets=["cora"], methods=["cadnet"])
    params["methods"] = ["cadnet", method]
    params["studies"]["b"] = {"datasets": ["cora"], "methods": [method], "grid": {key: [0.5]}}
    loaded = load(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.check_everything(loaded)
    assert_one_line(info.value, *message)


def test_a_range_sets_each_methods_own_range_setting(workdir):
    """Tables B.12-B.14: the grid key `range` is SGC's, APPNP's and CAD-Net's K, Cheby's order
    (ChebConv's K = range + 1 terms), GCN's, SAGE's, JK's and GAT's layers, AGNN's propagation
    layers."""
    params = params_with(datasets=["cora"], methods=["cadnet"])
    ranged = ["cadnet", "cheb", "sgc", "appnp", "gcn", "sage", "jknet", "gat", "agnn"]
    params["methods"] = ranged
    params["studies"]["ranges"] = {"datasets": ["cora"], "methods": ranged, "grid": {"range": [4, 10]}}
    loaded = load(workdir, params)
    config.check_everything(loaded)
    wanted = {"cadnet": "K", "cheb": "K", "sgc": "K", "appnp": "K", "gcn": "layers", "sage": "layers",
              "jknet": "layers", "gat": "layers", "agnn": "prop_layers"}
    for cell in (c for c in config.cells(loaded) if c.study == "ranges"):
        hp, table2 = config.cell_hparams(loaded, cell), config.hparams_for(loaded, "cora", cell.method)
        key = wanted[cell.method]
        r = dict(cell.setting)["range"]
        assert hp[key] == (r + 1 if cell.method == "cheb" else r) and "range" not in hp, cell
        assert {k: v for k, v in hp.items() if k != key} == {k: v for k, v in table2.items() if k != key}, cell
    assert [c.name for c in config.family(loaded, "cora", "gcn")] == ["baselines", "ranges-range=4", "ranges-range=10"]


@pytest.mark.parametrize("method, grid, message", [
    ("mixhop", {"range": [4]}, ["studies.r.grid.range", "mixhop has no range setting", "cheb"]),
    ("gcn", {"range": [0]}, ["studies.r.grid.range", "0", "an integer in [1, 64]"]),
    ("gcn", {"range": [2.5]}, ["studies.r.grid.range", "2.5"]),
])
def test_a_range_is_checked(workdir, method, grid, message):
    params = params_with(datasets=["cora"], methods=["cadnet"])
    params["methods"] = ["cadnet", method]
    params["studies"]["r"] = {"datasets": ["cora"], "methods": [method], "grid": grid}
    with pytest.raises(ConfigError) as info:
        config.check_everything(load(workdir, params))
    assert_one_line(info.value, *message)


def test_a_subset_seed_is_a_setting_of_the_public_subset_split_only(workdir):
    params = params_with(datasets=["cora"], methods=["cadnet"])
    params["studies"]["subsets"] = {"datasets": ["cora"], "methods": ["cadnet"], "settings": {"split": "public_subset"},
                                    "grid": {"train_per_class": [5], "subset_seed": [1, 2]}}
    loaded = load(workdir, params)
    cells = [c for c in config.cells(loaded) if c.study == "subsets"]
    assert [c.name for c in cells] == ["subsets-train_per_class=5-subset_seed=1", "subsets-train_per_class=5-subset_seed=2"]
    assert config.cell_hparams(loaded, cells[1])["subset_seed"] == 2
    assert "subset_seed" not in config.cell_hparams(loaded, config.Cell("main", "cora", "cadnet"))
    del params["studies"]["subsets"]["settings"]
    with pytest.raises(ConfigError) as info:
        config.check_everything(load(workdir, params))
    assert_one_line(info.value, "studies.subsets.grid.subset_seed", "public_subset only", "'public'")


def test_a_grid_is_a_cell_per_value_and_per_combination_over_the_methods_settings(workdir):
    params = params_with(datasets=["cora", "pubmed"], methods=["cadnet"], runs=100)
    params["methods"] = ["cadnet", "gcn"]
    params["studies"]["rates"] = {"datasets": ["cora"], "methods": ["cadnet", "gcn"], "runs": 20,
                                  "grid": {"train_per_class": [5, 10]}}
    params["studies"]["both"] = {"datasets": ["pubmed"], "methods": ["cadnet"],
                                 "grid": {"beta": [0.5, 0.9], "K": [2, 4]}}
    loaded = load(workdir, params)
    rates = [c for c in config.cells(loaded) if c.study == "rates"]
    assert [(c.method, c.name) for c in rates] == [("cadnet", "rates-train_per_class=5"), ("cadnet", "rates-train_per_class=10"),
                                                   ("gcn", "rates-train_per_class=5"), ("gcn", "rates-train_per_class=10")]
    assert [config.runs_for(loaded, c) for c in rates] == [20] * 4
    assert config.cell_hparams(loaded, rates[2])["train_per_class"] == 5
    assert config.hparams_for(loaded, "cora", "gcn")["train_per_class"] == 20  # the family's own settings stay
    both = [c for c in config.cells(loaded) if c.study == "both"]
    assert [c.name for c in both] == ["both-beta=0.5-K=2", "both-beta=0.5-K=4", "both-beta=0.9-K=2", "both-beta=0.9-K=4"]
    hp = config.cell_hparams(loaded, both[1])
    assert (hp["beta"], hp["K"], hp["lr"]) == (0.5, 4, config.hparams_for(loaded, "pubmed")["lr"])
    assert [c.name for c in config.family(loaded, "cora", "cadnet")] == ["main", "rates-train_per_class=5",
                                                                          "rates-train_per_class=10"]
    assert config.table_cells(loaded)[("cora", "cadnet")].name == "main"  # Tables 2 and 3 read main's


def test_a_studys_datasets_and_methods_outside_the_selection_are_skipped(workdir):
    params = params_with(datasets=["cora", "pubmed"], methods=["cadnet"])
    params["methods"] = ["cadnet", "rw"]
    params["datasets"] = ["cora"]
    params["studies"]["variants"] = {"datasets": ["cora", "pubmed"], "methods": ["rw", "cad"], "runs": {}}
    loaded = load(workdir, params)
    assert [str(c) for c in config.cells(loaded)] == ["cora/cadnet/main", "cora/rw/variants"]


def test_runs_and_cells_of_the_studies(workdir):
    variants = {"datasets": ["cora", "pubmed"], "methods": ["rw", "cad"], "runs": {"pubmed": 20}}
    baselines = {"datasets": ["cora"], "methods": ["gcn"], "runs": {"cora": 7}}
    loaded = load(workdir, params_with(datasets=["cora", "pubmed"], methods=["cadnet"], runs=100, variants=variants,
                                       baselines=baselines, runs_by_dataset={}))
    runs = {(c.dataset, c.method): config.runs_for(loaded, c) for c in config.cells(loaded)}
    assert runs[("cora", "gcn")] == 7
    assert runs[("pubmed", "rw")] == 20
    assert runs[("cora", "rw")] == 100  # not listed: the top-level runs
    assert runs[("pubmed", "cadnet")] == 100  # the main study ignores variants' runs
    loaded = load(workdir, params_with(datasets=["cora", "pubmed"], methods=["cadnet"], runs=100, variants=variants,
                                       baselines=baselines, runs_by_dataset={"pubmed": 30}))
    runs = {(c.dataset, c.method): config.runs_for(loaded, c) for c in config.cells(loaded)}
    assert (runs[("pubmed", "cadnet")], runs[("cora", "cadnet")], runs[("pubmed", "rw")]) == (30, 100, 20)
    assert [(c.dataset, c.method) for c in config.cells(loaded)] == [
        ("cora", "cadnet"), ("pubmed", "cadnet"), ("cora", "rw"), ("cora", "cad"), ("pubmed", "rw"), ("pubmed", "cad"),
        ("cora", "gcn")]
    per_method = {**variants, "runs": {"pubmed": {"rw": 0}}}  # 0: a cell not run; the others use `runs`
    loaded = load(workdir, params_with(datasets=["cora", "pubmed"], methods=["cadnet"], runs=100, variants=per_method,
                                       baselines=baselines, runs_by_dataset={}))
    runs = {(c.dataset, c.method): config.runs_for(loaded, c) for c in config.cells(loaded)}
    assert (runs[("pubmed", "rw")], runs[("pubmed", "cad")]) == (0, 100)
    params = params_with(datasets=["cora"], methods=["cadnet"])
    params["studies"]["main"]["runs"] = 12  # a number: every cell of the study
    loaded = load(workdir, params)
    assert [config.runs_for(loaded, c) for c in config.cells(loaded) if c.study == "main"] == [12]
    # a default for the cells a study's runs do not name: e.g. none run but one
    params = params_with(datasets=["cora", "pubmed"], methods=["cadnet"], runs=100)
    params["methods"] = ["cadnet", "gcn"]
    params["studies"]["rates"] = {"datasets": ["cora", "pubmed"], "methods": ["cadnet", "gcn"],
                                  "runs": {"default": 0, "cora": {"cadnet": 20}, "pubmed": 5}}
    loaded = load(workdir, params)
    assert {str(c): config.runs_for(loaded, c) for c in config.cells(loaded) if c.study == "rates"} == {
        "cora/cadnet/rates": 20, "cora/gcn/rates": 0, "pubmed/cadnet/rates": 5, "pubmed/gcn/rates": 5}
    params["studies"]["rates"]["runs"] = {"defualt": 0}
    write_params(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, "studies.rates.runs", "defualt", "default")


def test_runs_per_grid_point_land_a_long_family_cell_by_cell(workdir):
    """A family whose cells train longer than a sitting lands them one at a time: runs per grid
    point (the cell's name without its study), the method's `default` for the others, else the
    dataset's or the study's; the key each came from is named; a point not in the grid is an
    error naming the key and the points there are."""
    params = params_with(datasets=["cora"], methods=["cadnet"], runs=100)
    params["methods"] = ["cadnet", "gcn"]
    params["studies"]["ranges"] = {"datasets": ["cora"], "methods": ["cadnet", "gcn"], "grid": {"range": [2, 4, 6]},
                                   "runs": {"default": 0, "cora": {"cadnet": 100, "gcn": {"range=4": 20}}}}
    loaded = load(workdir, params)
    cells = {str(c): c for c in config.cells(loaded) if c.study == "ranges"}
    assert {name: config.runs_for(loaded, c) for name, c in cells.items()} == {
        "cora/cadnet/ranges-range=2": 100, "cora/cadnet/ranges-range=4": 100, "cora/cadnet/ranges-range=6": 100,
        "cora/gcn/ranges-range=2": 0, "cora/gcn/ranges-range=4": 20, "cora/gcn/ranges-range=6": 0}
    assert config.runs_key(loaded, cells["cora/gcn/ranges-range=4"]) == "studies.ranges.runs.cora.gcn.range=4"
    assert config.runs_key(loaded, cells["cora/gcn/ranges-range=6"]) == "studies.ranges.runs.default"
    assert config.runs_key(loaded, cells["cora/cadnet/ranges-range=6"]) == "studies.ranges.runs.cora.cadnet"
    params["studies"]["ranges"]["runs"]["cora"]["gcn"] = {"range=4": 20, "default": 5}
    loaded = load(workdir, params)
    assert [config.runs_for(loaded, c) for c in config.cells(loaded) if str(c).startswith("cora/gcn/ranges")] == [5, 20, 5]
    assert config.runs_key(loaded, cells["cora/gcn/ranges-range=6"]) == "studies.ranges.runs.cora.gcn.default"
    params["studies"]["ranges"]["runs"]["cora"]["gcn"] = {"range=5": 20}
    write_params(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, "studies.ranges.runs.cora.gcn", "range=5", "range=2, range=4, range=6, default")


# -------------------------------------------------------------------------- numbers as users write them


def test_scientific_notation_without_a_dot_is_a_number(workdir):
    """YAML 1.1 reads `5e-4` as a string; the pipeline takes it as the number it means."""
    text = shipped_params_text().replace("\nweight_decay:\n", "\nweight_decay: 5e-4\n", 1)  # the global override
    assert "weight_decay: 5e-4" in text
    (workdir / "params.yaml").write_text(text.replace("    weight_decay: 0.0005", "    weight_decay: 5e-4"))
    loaded = config.load_params()
    assert loaded["weight_decay"] == 0.0005 and loaded["hparams"]["cora"]["weight_decay"] == 0.0005
    assert config.hparams_for(loaded, "citeseer")["weight_decay"] == 0.0005


@pytest.mark.parametrize("key, value, allowed", [
    ("lr", float("inf"), "(0, 10]"),
    ("lr", 1000000, "(0, 10]"),
    ("leak_slope", float("inf"), "[0, 1]"),
    ("lambda_ent", float("inf"), "[0, 100]"),
    ("beta", float("nan"), "[0, 1]"),
    ("weight_decay", 5.0, "[0, 1]"),
])
def test_non_finite_and_unphysical_values_are_refused(workdir, key, value, allowed):
    write_params(workdir, params_with(**{key: value}))
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, key, allowed)


def test_a_dataset_row_is_checked_even_while_a_global_override_replaces_it(workdir):
    params = params_with(epochs=5)
    params["hparams"]["cora"]["epochs"] = "abc"
    with pytest.raises(ConfigError) as info:
        config.hparams_for(load(workdir, params), "cora")
    assert_one_line(info.value, "hparams.cora.epochs", "'abc'", "an integer in [1, 100000]")


def test_check_everything_covers_rows_of_unselected_datasets(workdir):
    params = params_with(datasets=["cora"], methods=["cadnet"], variants={"datasets": [], "methods": [], "runs": {}}, baselines={"datasets": [], "methods": [], "runs": {}})
    params["hparams"]["physics"]["normalize_features"] = 1
    loaded = load(workdir, params)
    config.hparams_for(loaded, "cora")  # the selected cell alone is fine
    with pytest.raises(ConfigError) as info:
        config.check_everything(loaded)
    assert_one_line(info.value, "hparams.physics.normalize_features", "got 1")


def test_a_study_may_set_runs_per_method_and_zero_leaves_a_cell_unrun(workdir):
    """`studies.baselines.runs.pubmed: {gat: 25, gdc: 0}`: GAT's cell has 25 seeds, GDC's is in
    the DVC matrix but not run (not among the cells the tables report), other methods use `runs`."""
    baselines = {"datasets": ["cora", "pubmed"], "methods": ["gcn", "gat", "gdc"],
                 "runs": {"cora": 7, "pubmed": {"gat": 25, "gdc": 0}}}
    loaded = load(workdir, params_with(datasets=["cora", "pubmed"], methods=["cadnet"], runs=100, baselines=baselines,
                                       variants={"datasets": [], "methods": [], "runs": {}}, runs_by_dataset={}))
    runs = {(c.dataset, c.method): config.runs_for(loaded, c) for c in config.cells(loaded)}
    assert [runs[("pubmed", m)] for m in ("gcn", "gat", "gdc")] == [100, 25, 0]
    assert [runs[("cora", m)] for m in ("gcn", "gat", "gdc")] == [7, 7, 7]
    assert ("pubmed", "gdc") in [(c.dataset, c.method) for c in config.cells(loaded)]
    assert ("pubmed", "gdc") not in [(c.dataset, c.method) for c in config.trained_cells(loaded)]
    assert len(config.trained_cells(loaded)) == len(config.cells(loaded)) - 1


def test_a_studys_runs_may_name_a_method_it_no_longer_selects(workdir):
    """`-S 'variants.methods=[]'` leaves `variants.runs.pubmed: {rw: 20, ...}` as written: those
    numbers wait for the methods to come back, they are not a typo."""
    variants = {"datasets": ["cora"], "methods": [], "runs": {"cora": {"rw": 20, "gat_rw": 0}}}
    loaded = load(workdir, params_with(datasets=["cora"], methods=["cadnet"], variants=variants))
    assert ("cora", "rw") not in [(c.dataset, c.method) for c in config.cells(loaded)]


@pytest.mark.parametrize("runs, message", [
    ({"pubmed": {"gcnn": 5}}, ["studies.baselines.runs.pubmed", "gcnn", "gcn"]),
    ({"pubmed": {"gat": -1}}, ["studies.baselines.runs.pubmed.gat", "[0, 10000]"]),
    ({"pubmed": {"gat": "25"}}, ["studies.baselines.runs.pubmed.gat", "[0, 10000]"]),
    ({"pubmed": -1}, ["studies.baselines.runs.pubmed", "[0, 10000]"]),
])
def test_per_method_runs_of_a_study_are_checked(workdir, runs, message):
    baselines = {"datasets": ["pubmed"], "methods": ["gcn", "gat"], "runs": runs}
    write_params(workdir, params_with(datasets=["pubmed"], methods=["cadnet"], baselines=baselines,
                                      variants={"datasets": [], "methods": [], "runs": {}}))
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, *message)


def test_a_baselines_protocol_applies_to_the_baselines_of_its_dataset_below_their_own_per_dataset_keys(workdir):
    """Shchur et al.'s protocol for the baselines on Photo (features as read, 1000 epochs, window
    50): GCN there trains so, except where method_hparams.<method>.photo says otherwise; GCN on
    Cora and CAD-Net on Photo keep their settings."""
    baselines = {"datasets": ["cora", "photo"], "methods": ["gcn", "gat"], "runs": {},
                 "protocol": {"photo": {"normalize_features": False, "epochs": 1000, "early_stop_window": 50}}}
    params = params_with(datasets=["cora", "photo"], methods=["cadnet"], baselines=baselines,
                         variants={"datasets": [], "methods": [], "runs": {}})
    params["method_hparams"]["gat"]["photo"] = {"lr": 0.01, "early_stop_window": 100}
    loaded = load(workdir, params)
    gcn = config.hparams_for(loaded, "photo", "gcn")
    assert (gcn["normalize_features"], gcn["epochs"], gcn["early_stop_window"]) == (False, 1000, 50)
    gat = config.hparams_for(loaded, "photo", "gat")
    assert (gat["normalize_features"], gat["epochs"], gat["early_stop_window"]) == (False, 1000, 100)
    cora = config.hparams_for(loaded, "cora", "gcn")
    assert (cora["normalize_features"], cora["epochs"], cora["early_stop_window"]) == ("clamped_sum", 200, 10)
    cadnet = config.hparams_for(loaded, "photo", "cadnet")
    assert (cadnet["normalize_features"], cadnet["epochs"]) == ("clamped_sum", loaded["hparams"]["photo"]["epochs"])


def test_a_baselines_own_row_for_a_dataset_may_renormalise_its_features_against_the_protocol(workdir):
    """ChebNet's source row-normalises its features: method_hparams.cheb.photo.normalize_features
    beats Photo's protocol (features as read) for ChebNet there only."""
    baselines = {"datasets": ["cora", "photo"], "methods": ["cheb", "gcn"], "runs": {},
                 "protocol": {"photo": {"normalize_features": False, "epochs": 1000, "early_stop_window": 50}}}
    params = params_with(datasets=["cora", "photo"], methods=["cadnet"], baselines=baselines,
                         variants={"datasets": [], "methods": [], "runs": {}})
    params["method_hparams"]["cheb"]["photo"] = {"normalize_features": "clamped_sum"}
    loaded = load(workdir, params)
    cheb = config.hparams_for(loaded, "photo", "cheb")
    assert (cheb["normalize_features"], cheb["epochs"], cheb["early_stop_window"]) == ("clamped_sum", 1000, 50)
    assert config.hparams_for(loaded, "photo", "gcn")["normalize_features"] is False
    assert config.hparams_for(loaded, "cora", "cheb")["normalize_features"] == "clamped_sum"


@pytest.mark.parametrize("method, row, message", [
    ("cheb", {"normalize_features": "l2"}, ["method_hparams.cheb.photo.normalize_features", "'l2'"]),
    ("cheb", {"self_loops": True}, ["method_hparams.cheb.photo.self_loops", "unknown key", "normalize_features"]),
    ("symna", {"normalize_features": False}, ["method_hparams.symna.photo.normalize_features", "unknown key"]),
])
def test_a_methods_own_row_for_a_dataset_takes_only_its_keys_and_a_baselines_protocol_keys(workdir, method, row, message):
    """Only a baseline takes the protocol's keys, checked like the protocol's own values; a
    Table 3 variant has CAD-Net's row and no protocol."""
    params = params_with(datasets=["photo"], methods=["cadnet"],
                         baselines={"datasets": ["photo"], "methods": ["cheb"], "runs": {}, "protocol": {}},
                         variants={"datasets": ["photo"], "methods": ["symna"], "runs": {}})
    params["method_hparams"][method]["photo"] = row
    loaded = load(workdir, params)
    with pytest.raises(ConfigError) as info:
        config.hparams_for(loaded, "photo", method)
    assert_one_line(info.value, *message)


@pytest.mark.parametrize("protocol, message", [
    ({"photo": {"normalize_features": "l2"}}, ["baseline_protocol.photo.normalize_features", "'l2'"]),
    ({"photo": {"epochs": 0}}, ["baseline_protocol.photo.epochs", "got 0"]),
    ({"photo": {"lr": 0.1}}, ["baseline_protocol.photo", "lr", "early_stop_window"]),
    ({"fotos": {"epochs": 10}}, ["baseline_protocol", "fotos", "photo"]),
    ({"photo": False}, ["baseline_protocol.photo", "must map"]),
    (False, ["baseline_protocol", "map a dataset"]),
])
def test_a_baselines_protocol_is_checked(workdir, protocol, message):
    baselines = {"datasets": ["photo"], "methods": ["gcn"], "runs": {}, "protocol": protocol}
    write_params(workdir, params_with(datasets=["photo"], methods=["cadnet"], baselines=baselines,
                                      variants={"datasets": [], "methods": [], "runs": {}}))
    with pytest.raises(ConfigError) as info:
        config.load_params()
    assert_one_line(info.value, *message)


def test_a_studys_settings_hold_for_all_its_cells_under_its_grid(workdir):
    """The label-rate study: the public split's subsets (one setting for the study) at 5 and 10
    labelled nodes per class (its grid); the names of its cells carry the grid only."""
    params = params_with(datasets=["cora"], methods=["cadnet"])
    params["studies"]["rates"] = {"datasets": ["cora"], "methods": ["cadnet"], "settings": {"split": "public_subset"},
                                  "grid": {"train_per_class": [5, 10]}}
    loaded = load(workdir, params)
    cells = [c for c in config.cells(loaded) if c.study == "rates"]
    assert [c.name for c in cells] == ["rates-train_per_class=5", "rates-train_per_class=10"]
    hp = config.cell_hparams(loaded, cells[0])
    assert (hp["split"], hp["train_per_class"]) == ("public_subset", 5)
    assert config.hparams_for(loaded, "cora", "cadnet")["split"] == "public"  # Table 2's cell keeps its own
    for settings, message in (({"split": "random"}, ["studies.rates.settings.split", "'random'", "public_subset"]),
                              ([], ["studies.rates.settings", "must map"]),
                              ({"seed_chunk": 5}, ["studies.rates.settings", "seed_chunk"])):
        params["studies"]["rates"]["settings"] = settings
        write_params(workdir, params)
        with pytest.raises(ConfigError) as info:
            config.load_params()
        assert_one_line(info.value, *message)
    params["studies"]["rates"] = {"datasets": ["cora"], "methods": ["cad"], "settings": {"beta": 0.5}}
    with pytest.raises(ConfigError) as info:
        config.check_everything(load(workdir, {**params, "methods": ["cadnet", "cad"]}))
    assert_one_line(info.value, "studies.rates.settings.beta", "fixed by cad's registry entry")


# ------------------------------------------------------------------------ a refused write


def test_a_file_size_limit_is_one_line_naming_the_file(tmp_path):
    """`ulimit -f` below what a stage writes: the system refuses the write (EFBIG), and the stage
    says so in one line naming the file, as it does for a full disk, not with a traceback."""
    script = ("import sys; from pathlib import Path; from pipeline import config, files\n"
              "config.run_main(lambda argv: files.write_text_atomic(Path(sys.argv[1]), 'x' * 100_000), [])\n")
    target = tmp_path / "table.csv"
    limit = "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))"
    proc = subprocess.run([sys.executable, "-c", f"{limit}\n{script}", str(target)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == (f"error: {target}: file too large; files it finished are kept; a limit on file size "
                           "(ulimit -f) is below what it writes; raise it and run it again\n")
    assert not target.exists() and not list(tmp_path.iterdir())  # no half file, no temporary left


def test_a_defect_raising_oserror_without_errno_keeps_its_traceback():
    def defect(argv):
        raise OSError("not a refusal of the system")
    with pytest.raises(OSError, match="not a refusal"):
        config.run_main(defect, [])


# ------------------------------------------------------------------------ params.yaml under -S


def test_set_param_changes_only_the_values_it_sets_and_keeps_every_comment(tmp_path):
    """`dvc exp run -S` writes params.yaml back through DVC's apply_overrides (the function its
    experiments call): the shipped file is already in the form it writes, so setting a value to
    itself changes no byte, and setting three values changes those three lines only."""
    from dvc.utils.hydra import apply_overrides

    shipped = shipped_params_text()
    same = tmp_path / "same.yaml"
    same.write_text(shipped)
    apply_overrides(str(same), [f"runs={SHIPPED_PARAMS['runs']}"])
    assert same.read_text() == shipped
    moved = tmp_path / "moved.yaml"
    moved.write_text(shipped)
    apply_overrides(str(moved), ["beta=0.9", "hparams.cora.beta=0.7", "studies.variants.runs.pubmed.rw=100"])
    before, after = shipped.splitlines(), moved.read_text().splitlines()
    assert len(before) == len(after)
    changed = [(old.strip(), new.strip()) for old, new in zip(before, after) if old != new]
    assert changed == [("rw: 20", "rw: 100"), ("beta:", "beta: 0.9"), ("beta: 0.8", "beta: 0.7")]
