"""Reading and checking `params.yaml`.

Every stage calls :func:`load_params` and, for one dataset, :func:`hparams_for`. Both check
their input before any work starts and fail with one line that names the key at fault and
the values it may take (:class:`ConfigError`).
"""
from __future__ import annotations

import errno
import functools
import hashlib
import itertools
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from pipeline.errors import ConfigError, DataError, PipelineError  # noqa: F401  (every stage reaches them here)
from pipeline.models.registry import rules_of
from pipeline.paths import PARAMS_FILE

DATASETS = ("citeseer", "cora", "pubmed", "computers", "photo", "cs", "physics")
DATASET_NAMES = {"citeseer": "CiteSeer", "cora": "Cora", "pubmed": "PubMed", "computers": "Amazon Computers",
                 "photo": "Amazon Photo", "cs": "Coauthor CS", "physics": "Coauthor Physics"}  # as the paper writes them
DROPOUT_SITES = ("input", "hidden", "logits")
DIRECTIONS = ("push", "pull")
SPLITS = ("public", "per_class", "public_subset", "random_planetoid")  # pipeline.engine.splits
NORMALIZATIONS = ("clamped_sum", "sum")  # pipeline.preprocess.normalize_rows
MAX_RUNS = 10_000  # seeds per cell: the paper runs 100; beyond this, a typo (1e12) more likely than intent
DEVICES = ("auto", "cpu", "cuda")
ENGINES = ("batched", "single")
TRANSITIONS = ("cad", "rw", "symna", "gat", "tf")
PROPAGATIONS = ("steps", "ppr", "heat")
WEIGHTINGS = ("adaptive", "none")
# A study (params.yaml `studies.<name>`): the datasets and methods it trains, its seeds, and
# optionally settings of its own for all its cells and a grid of settings, each of its values a
# cell of its own (pipeline.config.Cell)
STUDY_KEYS = ("datasets", "methods", "runs", "settings", "grid")
STUDY_NAME = re.compile(r"[a-z][a-z0-9_]*")
# The studies whose cells Tables 2 and 3 of the paper report (pipeline.stats reads them by
# (dataset, method), so a method is in one of them at most): CAD-Net's own row, its variants
# (Table 3, appendix B.3) and the baselines of Table 2
TABLE_STUDIES = ("main", "variants", "baselines")
# A grid sweeps what a cell computes, not how its data is built (graph.pt's self-loops) or batched
NOT_IN_A_GRID = ("self_loops", "seed_chunk")
# baseline_protocol.<dataset>: how every baseline trains on that dataset, where the method's
# own per-dataset keys (method_hparams.<method>.<dataset>) do not say otherwise
BASELINE_PROTOCOL_KEYS = ("normalize_features", "epochs", "early_stop_window")
TOP_LEVEL_KEYS = ("datasets", "methods", "runs", "studies", "baseline_protocol", "device", "engine", "seed_chunk",
                  "memory_budget_gb", "n_jobs", "chunk_workers", "hparams", "method_hparams")
# The top-level keys that must be written, with the global overrides of TABLE_RULES: dvc.yaml's
# matrices and params deps read some (DVC fails on a missing one only after deleting that stage's
# outputs, so the check stage requires them first; tests/test_dvc_yaml.py holds that), and
# `dvc exp run -S key=value` can set only a key that is written.
DVC_READS = ("datasets", "methods", "studies", "engine", "hparams", "method_hparams")

# One rule per hyperparameter of CAD-Net's table: (check, description of the allowed values).
# Every row of `hparams` has all of them; each has a global override of the same name.
TABLE_RULES: dict[str, tuple[Any, str]] = {
    "hidden": (lambda v: _is_int(v) and 1 <= v <= 65536, "an integer in [1, 65536]"),
    "leak_slope": (lambda v: _is_num(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "p_drop": (lambda v: _is_num(v) and 0 <= v < 1, "a number in [0, 1)"),
    "dropout_sites": (
        lambda v: isinstance(v, list) and all(s in DROPOUT_SITES for s in v),
        f"a list drawn from {list(DROPOUT_SITES)}",
    ),
    "K": (lambda v: _is_int(v) and 1 <= v <= 1000, "an integer in [1, 1000]"),
    "beta": (lambda v: _is_num(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "direction": (lambda v: v in DIRECTIONS, f"one of {list(DIRECTIONS)}"),
    "self_loops": (lambda v: isinstance(v, bool), "true or false"),
    "normalize_features": (lambda v: v is False or v in NORMALIZATIONS,
                           f"false or one of {list(NORMALIZATIONS)}"),
    "epochs": (lambda v: _is_int(v) and 1 <= v <= 100_000, "an integer in [1, 100000]"),
    "lr": (lambda v: _is_num(v) and 0 < v <= 10, "a number in (0, 10]"),
    "lr_drop_every": (lambda v: _is_int(v) and v >= 0, "an integer >= 0 (0: no drop)"),
    "lr_drop_factor": (lambda v: _is_num(v) and 0 < v <= 1, "a number in (0, 1]"),
    "weight_decay": (lambda v: _is_num(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "lambda_ent": (lambda v: _is_num(v) and 0 <= v <= 100, "a number in [0, 100]"),
    "early_stop_window": (lambda v: _is_int(v) and v >= 0, "an integer >= 0 (0: off)"),
    "split": (lambda v: v in SPLITS, f"one of {list(SPLITS)}"),
    "train_per_class": (lambda v: _is_int(v) and 1 <= v <= 100_000, "an integer in [1, 100000]"),
    "val_per_class": (lambda v: _is_int(v) and 1 <= v <= 100_000, "an integer in [1, 100000]"),
}


def _settings_rules() -> dict[str, tuple[Any, str]]:
    """A rule for every key of a registered method's settings schema (pipeline.models), the
    first method's where several have the key (each cell's value is checked by its own method's:
    :func:`rule_for`); a key without a rule of its own is one of CAD-Net's table (lr, hidden)."""
    rules: dict[str, tuple[Any, str]] = {}
    for entry in registry().values():
        for key, rule in (rules_of(entry.settings) if entry.settings else {}).items():
            assert rule is not None or key in TABLE_RULES, f"{entry.name}'s settings: {key} has no rule"
            if rule is not None:
                rules.setdefault(key, rule)
    return rules


OPTIONAL_OWN_KEYS = ("seed_chunk",)


def registry() -> dict:
    """The method registry (:mod:`pipeline.models`), loaded on first use: the methods' modules
    import torch, which a stage that names no method (download, evaluate) does without."""
    from pipeline.models import REGISTRY

    return REGISTRY


@functools.cache
def methods() -> tuple[str, ...]:
    return tuple(registry())


@functools.cache
def method_rules() -> dict[str, tuple[Any, str]]:
    """The parts of the aggregation (pipeline.models.adacad.AdaCAD), fixed by each method's
    registry entry; the network a baseline's entry fixes; and the methods' own hyperparameters
    (params.yaml `method_hparams`), each as its method's settings schema defines it."""
    from pipeline.models import BASELINES

    return {
        "transition": (lambda v: v in TRANSITIONS, f"one of {list(TRANSITIONS)}"),
        "propagation": (lambda v: v in PROPAGATIONS, f"one of {list(PROPAGATIONS)}"),
        "weighting": (lambda v: v in WEIGHTINGS, f"one of {list(WEIGHTINGS)}"),
        "baseline": (lambda v: v in BASELINES, f"one of {list(BASELINES)}"),
        **_settings_rules(),
        # any method's, optional: at most this many seeds per batched chunk for this method (or
        # this cell, under method_hparams.<method>.<dataset>) in place of the global seed_chunk.
        # A baseline's seeds share their chunk's dropout stream, so its chunk size (not this key)
        # is part of its seeds' identity (spec.seed_identity).
        "seed_chunk": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    }


def hparam_rules() -> dict[str, tuple[Any, str]]:
    return {**TABLE_RULES, **method_rules()}


def __getattr__(name: str):
    """``config.METHODS``, ``METHOD_RULES`` and ``HPARAM_RULES``, computed from the registry on first use."""
    lazy = {"METHODS": methods, "METHOD_RULES": method_rules, "HPARAM_RULES": hparam_rules}
    if name in lazy:
        return lazy[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# What a study may set beside the hyperparameters, absent from a cell's settings unless a study
# sets it: `range`, a method's range in hops, which each method reaches through its own setting
# (its registry entry's ``range_key``); `subset_seed`, which of the public training nodes the
# split public_subset keeps (pipeline.engine.splits; 0 where no study sets it).
STUDY_RULES: dict[str, tuple[Any, str]] = {
    "range": (lambda v: _is_int(v) and 1 <= v <= 64, "an integer in [1, 64]"),
    "subset_seed": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    """A finite int or float (inf and nan are never a hyperparameter here)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# PyYAML follows YAML 1.1, which reads `5e-4` (no dot) as a string; users write numbers so.
_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _numbers_from_strings(value: Any) -> Any:
    """`5e-4` and the like as the floats they mean, everywhere in the params tree."""
    if isinstance(value, dict):
        return {k: _numbers_from_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_from_strings(v) for v in value]
    if isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):
        return float(value)
    return value


def check_choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}: unknown value {value!r}; allowed values: {', '.join(allowed)}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key written twice in one mapping is an error: DVC refuses such
    a file, while PyYAML alone would silently keep the last value for the stage commands."""

    def construct_mapping(self, node, deep=False):
        lines: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in lines:
                raise ConfigError(f"{key}: written twice in {self.name} (lines {lines[key]} and {line}); keep one")
            lines[key] = line
        return super().construct_mapping(node, deep)


def read_yaml(path: Path) -> Any:
    """A YAML file's content; unreadable bytes, bad syntax and repeated keys are one line that
    names the file and the line."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        line = path.read_bytes()[:err.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte {err.object[err.start]:#04x}); save it as UTF-8") from None
    loader = _UniqueKeyLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: not valid YAML ({problem}{'; ' + context if context else ''}); "
                          f"indent with spaces and close every bracket") from None
    finally:
        loader.dispose()


def load_params(path: Path | str = PARAMS_FILE) -> dict:
    """Read params.yaml and check the top-level keys and every global override."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: file not found (run from the project root)")
    params = read_yaml(path)
    if params is not None and not isinstance(params, dict):
        raise ConfigError(f"{path}: must be a mapping of keys to values, not a {type(params).__name__}")
    params = _numbers_from_strings(params or {})
    known = {*TOP_LEVEL_KEYS, *TABLE_RULES}
    unknown = sorted(set(params) - known)
    if unknown:  # a typo such as `betta: 0.9` would otherwise be ignored silently
        raise ConfigError(f"{unknown[0]}: unknown key in {path}; allowed keys: {', '.join(sorted(known))}")
    missing = [key for key in (*DVC_READS, *TABLE_RULES) if key not in params]
    if missing:  # DVC would fail on it only after deleting a stage's outputs
        hint = " (null keeps each dataset's value)" if missing[0] in TABLE_RULES else ""
        raise ConfigError(f"{missing[0]}: missing from {path}; write it back (dvc.yaml and `dvc exp run -S` read it){hint}")

    for key in ("datasets", "methods"):
        _check_names(key, params.get(key), DATASETS if key == "datasets" else methods(), non_empty=True)
    _check_runs("runs", params.get("runs"))
    studies = params.get("studies")
    if not isinstance(studies, dict) or not studies:
        raise ConfigError("studies: must map each study's name to its datasets, methods, runs and grid")
    in_tables: dict[str, str] = {}
    for name in studies:
        _check_study(params, name, in_tables)
    params["baseline_protocol"] = _check_protocol(params.get("baseline_protocol"))
    check_choice("device", params.get("device", "auto"), DEVICES)
    check_choice("engine", params.get("engine", "batched"), ENGINES)
    chunk = params.get("seed_chunk", "auto")
    if not (chunk == "auto" or (_is_int(chunk) and chunk >= 1)):
        raise ConfigError(f"seed_chunk: got {chunk!r}; allowed values: auto or an integer >= 1")
    budget = params.get("memory_budget_gb", 6)
    if not (_is_num(budget) and budget > 0):
        raise ConfigError(f"memory_budget_gb: got {budget!r}; allowed values: a number > 0")
    for key, default in (("n_jobs", -1), ("chunk_workers", 1)):
        workers = params.get(key, default)
        if not (_is_int(workers) and workers != 0):
            raise ConfigError(f"{key}: got {workers!r}; allowed values: a non-zero integer (-1: all cores)")

    table = params.get("hparams")
    if not isinstance(table, dict):
        raise ConfigError("hparams: missing per-dataset hyperparameter table")
    for name in table:
        check_choice("hparams", name, DATASETS)
    for key in TABLE_RULES:
        if params.get(key) is not None:
            _check_hparam(key, key, params[key])
    own = params.get("method_hparams") or {}
    if not isinstance(own, dict):
        raise ConfigError("method_hparams: must be a mapping of method name to its hyperparameters")
    for name in own:
        check_choice("method_hparams", name, methods())
    for method in params["methods"]:
        if method not in own:  # where `dvc exp run -S method_hparams.<method>.<key>=...` writes
            raise ConfigError(f"method_hparams.{method}: missing; write `{method}: {{}}` under method_hparams "
                              f"where it has no keys of its own")
    return params


def _check_names(where: str, names: Any, allowed: tuple[str, ...], non_empty: bool = False) -> None:
    """A block-style list of distinct names drawn from ``allowed``."""
    if not isinstance(names, list) or (non_empty and not names):
        got = "an empty list" if names == [] else repr(names)
        raise ConfigError(f"{where}: got {got}; allowed values: a {'non-empty ' if non_empty else ''}list drawn from "
                          f"{', '.join(allowed)} (one per line, each after '- ')")
    for name in names:
        check_choice(where, name, allowed)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"{where}: {twice[0]!r} is listed twice; list each once")


def _check_runs(where: str, runs: Any, lowest: int = 1) -> None:
    if not (_is_int(runs) and lowest <= runs <= MAX_RUNS):
        not_run = " (0: not run)" if lowest == 0 else ""
        raise ConfigError(f"{where}: got {runs!r}; allowed values: an integer in [{lowest}, {MAX_RUNS}]{not_run}")


def _check_study(params: dict, name: str, in_tables: dict[str, str]) -> None:
    """One block of `studies`: its datasets and methods (those of the selection, the top-level
    `datasets` and `methods`, train; the others are skipped), its runs, and its grid."""
    if not STUDY_NAME.fullmatch(str(name)):
        raise ConfigError(f"studies: {name!r} is not a study name; use lower-case letters, digits and _")
    where = f"studies.{name}"
    spec = params["studies"][name]
    if not isinstance(spec, dict) or set(spec) - set(STUDY_KEYS):
        raise ConfigError(f"{where}: must be a mapping with keys {', '.join(STUDY_KEYS)}")
    for key in ("datasets", "methods"):
        if key not in spec:
            raise ConfigError(f"{where}.{key}: missing (an empty one: [])")
        _check_names(f"{where}.{key}", spec[key], DATASETS if key == "datasets" else methods())
    if name in TABLE_STUDIES:
        for method in spec["methods"]:
            if method in in_tables:
                raise ConfigError(f"{where}.methods: {method!r} is also in studies.{in_tables[method]}; Tables 2 and 3 "
                                  f"report each method from one of {', '.join(TABLE_STUDIES)}")
            in_tables[method] = name
    spec["settings"] = _check_settings(where, spec.get("settings"))
    spec["grid"] = _check_values(f"{where}.grid", spec.get("grid"))
    runs = spec.get("runs")
    if _is_int(runs):
        _check_runs(f"{where}.runs", runs, lowest=0)
    else:  # a cell's runs may stay written while its method is dropped (`-S 'studies.variants.methods=[]'`)
        points = [point_name(setting) for setting in grid_points(spec["grid"])] if spec["grid"] else []
        spec["runs"] = _check_runs_by_dataset(f"{where}.runs", runs, list(methods()), points)


def _check_settings(where: str, settings: Any) -> dict:
    """A study's settings: setting -> the one value every cell of the study trains with."""
    settings = {} if settings is None else settings
    if not isinstance(settings, dict):
        raise ConfigError(f"{where}.settings: must map a setting to its value")
    _check_values(f"{where}.settings", {key: [value] for key, value in settings.items()})
    return settings


def _check_values(where: str, grid: Any) -> dict:
    """A study's grid (``where``: its key): setting -> its values (a cell each; several settings:
    every combination). Its settings are checked so too, each value a list of one."""
    grid = {} if grid is None else grid
    if not isinstance(grid, dict):
        raise ConfigError(f"{where}: must map a setting to the list of its values")
    for key, values in grid.items():
        check_choice(where, key, tuple(k for k in {**hparam_rules(), **STUDY_RULES} if k not in NOT_IN_A_GRID))
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}.{key}: got {values!r}; allowed values: a non-empty list (one per line)")
        for value in values:
            if not isinstance(value, (int, float, str)) or isinstance(value, bool):
                raise ConfigError(f"{where}.{key}: {value!r} is not a number or a name; a study sets those")
            if key not in method_rules():  # a method's own key: each cell checks it by its method's rule
                _check_hparam(f"{where}.{key}", key, value)
        if len(set(values)) < len(values):
            raise ConfigError(f"{where}.{key}: a value is listed twice; list each once")
    return grid


def _check_protocol(protocol: Any) -> dict:
    """`baseline_protocol`: dataset -> {key: value} for keys of BASELINE_PROTOCOL_KEYS."""
    protocol = {} if protocol is None else protocol
    if not isinstance(protocol, dict):
        raise ConfigError(f"baseline_protocol: must map a dataset to some of {', '.join(BASELINE_PROTOCOL_KEYS)}")
    for name, values in protocol.items():
        check_choice("baseline_protocol", name, DATASETS)
        if not isinstance(values, dict):
            raise ConfigError(f"baseline_protocol.{name}: must map some of {', '.join(BASELINE_PROTOCOL_KEYS)} to values")
        for key, value in values.items():
            check_choice(f"baseline_protocol.{name}", key, BASELINE_PROTOCOL_KEYS)
            _check_hparam(f"baseline_protocol.{name}.{key}", key, value)
    return protocol


def _check_runs_by_dataset(where: str, runs: Any, methods: list[str], points: list[str] = ()) -> dict:
    """A study's runs per dataset: dataset -> runs, or dataset -> {method: runs} for some of its
    methods, or, in a study with a grid, method -> {point: runs} for some of its ``points``
    (``range=4``: the cell's name without the study); ``default`` at any level: the runs of every
    cell not named there (else the level above's, at the top the top-level `runs`). 0 means the
    cell is not run: it stays in the DVC matrix, trains nothing, and the tables say "not run"."""
    runs = {} if runs is None else runs  # absent or written empty; "" is not a mapping
    if not isinstance(runs, dict):
        raise ConfigError(f"{where}: must be a number of runs, or map a dataset (or default) to its runs or to "
                          f"{{method: runs}}")
    for name, value in runs.items():
        check_choice(where, name, (*DATASETS, "default"))
        if name == "default" or not isinstance(value, dict):
            _check_runs(f"{where}.{name}", value, lowest=0)
            continue
        for method, count in value.items():
            check_choice(f"{where}.{name}", method, methods)
            if not isinstance(count, dict) or not points:
                _check_runs(f"{where}.{name}.{method}", count, lowest=0)
                continue
            for point, point_count in count.items():
                check_choice(f"{where}.{name}.{method}", point, (*points, "default"))
                _check_runs(f"{where}.{name}.{method}.{point}", point_count, lowest=0)
    return runs


class Cell(NamedTuple):
    """The unit of work: one study's (dataset, method) at one point of its grid. Cells of one
    (dataset, method) are that pair's family: one train stage and one evaluate stage each
    (train@<dataset>-<method>), a file per cell in them, named by :attr:`name`."""
    study: str
    dataset: str
    method: str
    setting: tuple = ()  # ((key, value), ...): the study's grid values, in the grid's order

    @property
    def name(self) -> str:
        """``main``, ``beta-beta=0.65``: the study, then its :attr:`point`."""
        return self.study + (f"-{self.point}" if self.setting else "")

    @property
    def point(self) -> str:
        """``beta=0.65``, ``lambda_ent=0.5-lr=0.01``: its grid values; ``""`` without a grid."""
        return point_name(self.setting)

    def __str__(self) -> str:
        return f"{self.dataset}/{self.method}/{self.name}"


def point_name(setting: tuple) -> str:
    return "-".join(f"{key}={value}" for key, value in setting)


def grid_points(grid: dict) -> list[tuple]:
    """A grid's points in its order: each a ((key, value), ...) of one value per setting."""
    return list(itertools.product(*[[(key, value) for value in values] for key, values in grid.items()]))


def cells(params: dict) -> list[Cell]:
    """Every cell the studies train on the selected datasets and methods, study by study in
    params.yaml's order, then in each study's order of datasets, methods and grid values."""
    found = []
    for study, spec in params["studies"].items():
        points = grid_points(spec["grid"])
        for dataset in spec["datasets"]:
            for method in spec["methods"]:
                if dataset in params["datasets"] and method in params["methods"]:
                    found += [Cell(study, dataset, method, setting) for setting in points]
    return found


def family(params: dict, dataset: str, method: str) -> list[Cell]:
    """The cells of one (dataset, method): what its train and evaluate stages compute."""
    return [cell for cell in cells(params) if (cell.dataset, cell.method) == (dataset, method)]


def trained_cells(params: dict) -> list[Cell]:
    """The cells of :func:`cells` with at least one run: the ones the tables report."""
    return [cell for cell in cells(params) if runs_for(params, cell) > 0]


def table_cells(params: dict, trained: bool = True) -> dict[tuple[str, str], Cell]:
    """The cells (``trained``: with at least one run) of the studies of Tables 2 and 3 (each
    without a grid), by (dataset, method): the reports of those tables read them so."""
    return {(c.dataset, c.method): c for c in (trained_cells(params) if trained else cells(params))
            if c.study in TABLE_STUDIES and not c.setting}


def table_cell_name(params: dict, method: str) -> str:
    """The name of ``method``'s cells in Tables 2 and 3: the study of TABLE_STUDIES that lists it."""
    for study in TABLE_STUDIES:
        if method in (params["studies"].get(study) or {}).get("methods", []) and not params["studies"][study]["grid"]:
            return study
    raise ConfigError(f"{method}: in none of the studies {', '.join(TABLE_STUDIES)} (without a grid); "
                      f"Tables 2 and 3 read it from one")


def runs_for(params: dict, cell: Cell) -> int:
    """Seeds of one cell: its study's `runs` (a number, or per dataset, or per dataset and method,
    or per dataset, method and grid point, the others its `default`), else the top-level `runs`
    (0: not run)."""
    runs = params["studies"][cell.study].get("runs")
    if _is_int(runs):
        return runs
    default = (runs or {}).get("default", params["runs"])
    value = (runs or {}).get(cell.dataset, default)
    value = value.get(cell.method, default) if isinstance(value, dict) else value
    return value.get(cell.point, value.get("default", default)) if isinstance(value, dict) else value


def runs_key(params: dict, cell: Cell) -> str:
    """The params.yaml key :func:`runs_for` took the cell's seeds from."""
    runs = params["studies"][cell.study].get("runs")
    where = f"studies.{cell.study}.runs"
    if _is_int(runs):
        return where
    value = (runs or {}).get(cell.dataset)
    points = value.get(cell.method) if isinstance(value, dict) else None
    if isinstance(points, dict) and (cell.point in points or "default" in points):
        return f"{where}.{cell.dataset}.{cell.method}.{cell.point if cell.point in points else 'default'}"
    if isinstance(value, dict) and cell.method in value and not isinstance(points, dict):
        return f"{where}.{cell.dataset}.{cell.method}"
    if value is not None and not isinstance(value, dict):
        return f"{where}.{cell.dataset}"
    return f"{where}.default" if "default" in (runs or {}) else "runs"


def baseline_methods(params: dict) -> list[str]:
    """The selected methods that are baselines of Table 2 (pipeline.models.baselines)."""
    return [m for m in params["methods"] if registry()[m].table_keys is not None]


def check_everything(params: dict) -> None:
    """Every row of the table (selected datasets or not) and every selected cell's resolved
    hyperparameters: what the check stage runs before any other stage."""
    for dataset in params["hparams"]:
        hparams_for(params, dataset, "cadnet")
    for cell in cells(params):
        cell_hparams(params, cell)


def cell_hparams(params: dict, cell: Cell) -> dict:
    """The hyperparameters a cell trains with: its (dataset, method)'s (:func:`hparams_for`), its
    study's settings over them, and its grid values over those. A study sets what the method
    has and its registry entry leaves free."""
    hp = hparams_for(params, cell.dataset, cell.method)
    fixed = registry()[cell.method].fixed
    own = params["studies"][cell.study].get("settings") or {}
    for where, key, value in [("settings", k, v) for k, v in own.items()] + [("grid", k, v) for k, v in cell.setting]:
        if key == "range":
            key = registry()[cell.method].range_key
            if not key:
                ranged = ", ".join(name for name, entry in registry().items() if entry.range_key)
                raise ConfigError(f"studies.{cell.study}.{where}.range: {cell.method} has no range setting (methods "
                                  f"with one: {ranged}); drop {cell.method} from the study")
            hp[key] = registry()[cell.method].setting_for_range(value)
            continue
        if key == "subset_seed":
            if hp.get("split") != "public_subset":
                raise ConfigError(f"studies.{cell.study}.{where}.subset_seed: applies to the split public_subset only "
                                  f"(its split is {hp.get('split')!r}); set `split: public_subset` in its settings")
            hp[key] = value
            continue
        if (key not in hp and key not in registry()[cell.method].optional_keys) or key in fixed:
            why = f"fixed by {cell.method}'s registry entry" if key in fixed else f"not a setting of {cell.method}"
            raise ConfigError(f"studies.{cell.study}.{where}.{key}: {why}; drop {cell.method} from the study or the "
                              f"key from its {where}")
        _check_hparam(f"studies.{cell.study}.{where}.{key}", key, value, cell.method)
        hp[key] = value
    return hp


def rule_for(key: str, method: str | None = None) -> tuple[Any, str]:
    """The rule a value of ``key`` must keep: ``method``'s settings schema's, where it has one."""
    settings = registry()[method].settings if method else None
    own = rules_of(settings).get(key) if settings else None
    return own or {**hparam_rules(), **STUDY_RULES}[key]


def _check_hparam(where: str, key: str, value: Any, method: str | None = None) -> None:
    check, allowed = rule_for(key, method)
    if not check(value):
        raise ConfigError(f"{where}: got {value!r}; allowed values: {allowed}")


def hparams_for(params: dict, dataset: str, method: str = "cadnet") -> dict:
    """The hyperparameters one (dataset, method) trains with, in this order: the dataset's row
    of CAD-Net's table, the global overrides, what the method's registry entry fixes, and the
    method's own keys (`method_hparams.<method>`, where `method_hparams.<method>.<dataset>`
    overrides the method's default)."""
    check_choice("dataset", dataset, DATASETS)
    check_choice("method", method, methods())
    row = params["hparams"].get(dataset)
    if row is None:
        raise ConfigError(f"hparams.{dataset}: missing from params.yaml")
    unknown = sorted(set(row) - set(TABLE_RULES))
    if unknown:
        raise ConfigError(
            f"hparams.{dataset}.{unknown[0]}: unknown key; allowed keys: {', '.join(TABLE_RULES)}"
        )
    resolved = {}
    for key in TABLE_RULES:
        # a row's value is checked even where a global override replaces it: it is what a
        # user gets back by resetting the override, and an unchecked value would sit in dvc.lock
        if key in row:
            _check_hparam(f"hparams.{dataset}.{key}", key, row[key])
        if params.get(key) is not None:
            resolved[key] = params[key]
        elif key in row:
            resolved[key] = row[key]
        else:
            raise ConfigError(f"hparams.{dataset}.{key}: missing")
    entry = registry()[method]
    blocks = params.get("method_hparams") or {}
    own = blocks.get(entry.hparams_of or method) or {}
    per_dataset = own.get(dataset) or {}
    if entry.table_keys is not None:  # a baseline: only the protocol comes from CAD-Net's table
        resolved = {k: resolved[k] for k in entry.table_keys}
        # and the baselines' own protocol on this dataset beats it (Shchur et al. on Amazon/
        # Coauthor: features as read, which the train stage renormalises by this rule)
        protocol = (params.get("baseline_protocol") or {}).get(dataset) or {}
        resolved.update({k: v for k, v in protocol.items() if k in resolved})
        # and the baseline's own per-dataset value beats the protocol's (ChebNet's source
        # row-normalises its features where Shchur et al.'s protocol reads them as they are)
        resolved.update({k: v for k, v in per_dataset.items() if k in resolved and k in BASELINE_PROTOCOL_KEYS})
    else:
        protocol = {}
    resolved.update(entry.fixed)
    resolved.update(_own_hparams(own, per_dataset, dataset, method, protocol))
    if entry.hparams_of:  # and its own block's values over those it read
        resolved.update(_own_overrides(blocks.get(method) or {}, dataset, method))
    for key in method_rules():
        if key in resolved:
            _check_hparam(f"{method}.{key}", key, resolved[key], method)
    return resolved


def _own_hparams(own: dict, per_dataset: dict, dataset: str, method: str, protocol: dict) -> dict:
    """The method's own keys from ``own`` (`method_hparams.<method>`, or the entry's
    ``hparams_of``): ``per_dataset`` values (`method_hparams.<method>.<dataset>`) win, then the
    dataset's baseline ``protocol``, then the method's default."""
    entry = registry()[method]
    allowed = entry.own_keys
    method = entry.hparams_of or method  # the block read, which every message below names
    # a baseline's row for one dataset may also set a protocol key it takes from CAD-Net's table
    per_dataset_only = tuple(k for k in BASELINE_PROTOCOL_KEYS if k in (entry.table_keys or ()))
    # a block read for another entry may hold that entry's keys which this one fixes
    optional = entry.optional_keys + OPTIONAL_OWN_KEYS
    _check_known_keys(own, per_dataset, dataset, method, registry()[method].own_keys + optional, per_dataset_only)
    values = {}
    for key in allowed:
        value = per_dataset.get(key, protocol.get(key, own.get(key)))
        if value is None:
            raise ConfigError(f"method_hparams.{method}.{key}: missing")
        _check_hparam(f"method_hparams.{method}{'.' + dataset if key in per_dataset else ''}.{key}", key, value, method)
        values[key] = value
    values.update(_values_set(own, per_dataset, dataset, method, optional))
    return values


def _own_overrides(block: dict, dataset: str, method: str) -> dict:
    """An entry that reads another's block (``hparams_of``) may set its own values of the same
    keys in ``method_hparams.<method>`` (per dataset under ``.<dataset>``); the keys its registry
    entry fixes are not among them."""
    keys = registry()[method].own_keys + registry()[method].optional_keys + OPTIONAL_OWN_KEYS
    per_dataset = block.get(dataset) or {}
    _check_known_keys(block, per_dataset, dataset, method, keys)
    return _values_set(block, per_dataset, dataset, method, keys)


def _check_known_keys(block: dict, per_dataset: dict, dataset: str, name: str, keys: tuple[str, ...],
                      per_dataset_only: tuple[str, ...] = ()) -> None:
    """Every key of `method_hparams.<name>` is one of ``keys`` or a dataset's row, and every key
    of its `.<dataset>` row one of ``keys`` or ``per_dataset_only`` (whose values are checked here)."""
    for where, mapping in ((f"method_hparams.{name}", block), (f"method_hparams.{name}.{dataset}", per_dataset)):
        known = keys + (per_dataset_only if mapping is per_dataset else ())
        for key in mapping:
            if key not in known and not (mapping is block and key in DATASETS):
                raise ConfigError(f"{where}.{key}: unknown key; allowed keys: {', '.join(known) or 'none'}")
            if key in per_dataset_only:
                _check_hparam(f"{where}.{key}", key, mapping[key])


def _values_set(block: dict, per_dataset: dict, dataset: str, name: str, keys: tuple[str, ...]) -> dict:
    """Those of ``keys`` that `method_hparams.<name>` or its `.<dataset>` row sets (the row's
    value wins), each checked under the name of where it was set."""
    values = {}
    for key in keys:
        value = per_dataset.get(key, block.get(key))
        if value is not None:
            _check_hparam(f"method_hparams.{name}{'.' + dataset if key in per_dataset else ''}.{key}", key, value, name)
            values[key] = value
    return values


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-able values, used to tell whether stored results are stale."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cell_args(argv: list[str], stage: str, check_method: bool = True) -> tuple[str, str]:
    """``<dataset> [<method>]`` of a per-cell stage command (method: cadnet), each checked (the
    method against the registry unless ``check_method`` is False: evaluate, which reads the
    family's specs and says so when there are none, loads no network code); an extra argument is
    refused rather than ignored."""
    if not 1 <= len(argv) <= 2:
        extra = f"; unexpected argument {argv[2]!r}" if len(argv) > 2 else ""
        raise ConfigError(f"usage: python -m pipeline.{stage} <dataset> [<method>]{extra}")
    dataset, method = argv[0], (argv[1] if len(argv) > 1 else "cadnet")
    check_choice("dataset", dataset, DATASETS)
    if check_method:
        check_choice("method", method, methods())
    return dataset, method


def no_args(argv: list[str], stage: str) -> None:
    """A command that takes no argument refuses one rather than ignoring it."""
    if argv:
        raise ConfigError(f"usage: python -m pipeline.{stage}; unexpected argument {argv[0]!r}")


# OSError numbers meaning the disk (or the user's quota) is full
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# what to do about the other refusals of a write, where there is more to say than "mend that"
MENDS = {
    errno.EFBIG: "a limit on file size (ulimit -f) is below what it writes; raise it and run it again",
    errno.EACCES: "give this user write permission there and run it again",
    errno.EPERM: "give this user write permission there and run it again",
    errno.EROFS: "run it where the file system is writable",
}


def run_main(main, argv: list[str] | None = None, kept: str = "files it finished are kept") -> None:
    """Run a stage's main(argv). A PipelineError becomes one line on stderr and exit code 1; so
    do a full disk, any other read or write the system refuses (a file size limit, a read-only
    file system, a permission) and Ctrl-C, each saying what was kept (``kept``: what this stage
    keeps, since it writes every file whole or not at all)."""
    try:
        main(sys.argv[1:] if argv is None else argv)
    except PipelineError as err:
        sys.exit(f"error: {err}")
    except KeyboardInterrupt:
        print(f"interrupted: {kept}; run it again to go on", file=sys.stderr)
        sys.exit(130)
    except OSError as err:
        if err.errno is None:  # not the system's refusal of a read or a write: a defect, traceback and all
            raise
        where = f"{err.filename}: " if err.filename else ""
        if err.errno in DISK_FULL:
            sys.exit(f"error: {where}no space left on device; {kept}; free some space and run it again")
        mend = MENDS.get(err.errno, "mend that and run it again")
        sys.exit(f"error: {where}{(err.strerror or os.strerror(err.errno)).lower()}; {kept}; {mend}")
