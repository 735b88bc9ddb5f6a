"""Reading and checking `params.yaml`.

Every stage calls :func:`load_params` and, for one dataset, :func:`hparams_for`. Both check
their input before any work starts and fail with one line that names the key at fault and
the values it may take (:class:`ConfigError`).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml

PARAMS_FILE = Path("params.yaml")

DATASETS = ("citeseer", "cora", "pubmed", "computers", "photo", "cs", "physics")
# Methods the train stage knows: each is CAD-Net with some hyperparameters fixed, applied
# after the table and the global overrides. Baselines and ablations join here later.
METHODS: dict[str, dict] = {
    "cadnet": {},  # as params.yaml says (direction push: the authors' code)
    "cadnet_pull": {"direction": "pull"},  # the paper's Eq. (6) direction, reported beside it
}
DROPOUT_SITES = ("input", "hidden", "logits")
DIRECTIONS = ("push", "pull")
SPLITS = ("public", "per_class")
DEVICES = ("auto", "cpu", "cuda")
ENGINES = ("batched", "single")
TOP_LEVEL_KEYS = ("datasets", "methods", "runs", "device", "engine", "seed_chunk", "memory_budget_gb",
                  "n_jobs", "hparams")

# One rule per hyperparameter: (check, description of the allowed values).
HPARAM_RULES: dict[str, tuple[Any, str]] = {
    "hidden": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "leak_slope": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
    "p_drop": (lambda v: _is_num(v) and 0 <= v < 1, "a number in [0, 1)"),
    "dropout_sites": (
        lambda v: isinstance(v, list) and all(s in DROPOUT_SITES for s in v),
        f"a list drawn from {list(DROPOUT_SITES)}",
    ),
    "K": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "beta": (lambda v: _is_num(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "direction": (lambda v: v in DIRECTIONS, f"one of {list(DIRECTIONS)}"),
    "self_loops": (lambda v: isinstance(v, bool), "true or false"),
    "normalize_features": (lambda v: isinstance(v, bool), "true or false"),
    "epochs": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "lr": (lambda v: _is_num(v) and v > 0, "a number > 0"),
    "lr_drop_every": (lambda v: _is_int(v) and v >= 0, "an integer >= 0 (0: no drop)"),
    "lr_drop_factor": (lambda v: _is_num(v) and 0 < v <= 1, "a number in (0, 1]"),
    "weight_decay": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
    "lambda_ent": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
    "early_stop_window": (lambda v: _is_int(v) and v >= 0, "an integer >= 0 (0: off)"),
    "split": (lambda v: v in SPLITS, f"one of {list(SPLITS)}"),
    "train_per_class": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "val_per_class": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
}


class PipelineError(Exception):
    """An input problem a user can fix; its message is one line and names what is at fault."""


class ConfigError(PipelineError):
    """A bad value in params.yaml or a bad command-line argument."""


class DataError(PipelineError):
    """A missing, corrupt or unreachable data file."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}: unknown value {value!r}; allowed values: {', '.join(allowed)}")


def load_params(path: Path | str = PARAMS_FILE) -> dict:
    """Read params.yaml and check the top-level keys and every global override."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: file not found (run from the project root)")
    params = yaml.safe_load(path.read_text()) or {}
    known = {*TOP_LEVEL_KEYS, *HPARAM_RULES}
    unknown = sorted(set(params) - known)
    if unknown:  # a typo such as `betta: 0.9` would otherwise be ignored silently
        raise ConfigError(f"{unknown[0]}: unknown key in {path}; allowed keys: {', '.join(sorted(known))}")

    for key in ("datasets", "methods"):
        if not isinstance(params.get(key), list) or not params[key]:
            raise ConfigError(f"{key}: must be a non-empty list")
    for name in params["datasets"]:
        check_choice("datasets", name, DATASETS)
    for name in params["methods"]:
        check_choice("methods", name, tuple(METHODS))
    runs = params.get("runs")
    if not (_is_int(runs) and runs >= 1):
        raise ConfigError(f"runs: got {runs!r}; allowed values: an integer >= 1")
    check_choice("device", params.get("device", "auto"), DEVICES)
    check_choice("engine", params.get("engine", "batched"), ENGINES)
    chunk = params.get("seed_chunk", "auto")
    if not (chunk == "auto" or (_is_int(chunk) and chunk >= 1)):
        raise ConfigError(f"seed_chunk: got {chunk!r}; allowed values: auto or an integer >= 1")
    budget = params.get("memory_budget_gb", 6)
    if not (_is_num(budget) and budget > 0):
        raise ConfigError(f"memory_budget_gb: got {budget!r}; allowed values: a number > 0")
    n_jobs = params.get("n_jobs", -1)
    if not (_is_int(n_jobs) and n_jobs != 0):
        raise ConfigError(f"n_jobs: got {n_jobs!r}; allowed values: a non-zero integer (-1: all cores)")

    table = params.get("hparams")
    if not isinstance(table, dict):
        raise ConfigError("hparams: missing per-dataset hyperparameter table")
    for name in table:
        check_choice("hparams", name, DATASETS)
    for key in HPARAM_RULES:
        if params.get(key) is not None:
            _check_hparam(key, key, params[key])
    return params


def _check_hparam(where: str, key: str, value: Any) -> None:
    check, allowed = HPARAM_RULES[key]
    if not check(value):
        raise ConfigError(f"{where}: got {value!r}; allowed values: {allowed}")


def hparams_for(params: dict, dataset: str, method: str = "cadnet") -> dict:
    """The hyperparameters one dataset trains with: its table row, then the global
    overrides, then what the method fixes."""
    check_choice("dataset", dataset, DATASETS)
    row = params["hparams"].get(dataset)
    if row is None:
        raise ConfigError(f"hparams.{dataset}: missing from params.yaml")
    unknown = sorted(set(row) - set(HPARAM_RULES))
    if unknown:
        raise ConfigError(
            f"hparams.{dataset}.{unknown[0]}: unknown key; allowed keys: {', '.join(HPARAM_RULES)}"
        )
    resolved = {}
    for key in HPARAM_RULES:
        if params.get(key) is not None:
            resolved[key] = params[key]
        elif key in row:
            resolved[key] = row[key]
        else:
            raise ConfigError(f"hparams.{dataset}.{key}: missing")
        _check_hparam(f"hparams.{dataset}.{key}", key, resolved[key])
    check_choice("method", method, tuple(METHODS))
    return {**resolved, **METHODS[method]}


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-able values, used to tell whether stored results are stale."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def run_main(main, argv: list[str] | None = None) -> None:
    """Run a stage's main(argv); a PipelineError becomes one line on stderr and exit code 1."""
    try:
        main(sys.argv[1:] if argv is None else argv)
    except PipelineError as err:
        sys.exit(f"error: {err}")
