"""The method registry (pipeline/methods.py): every entry is complete and consistent."""
from __future__ import annotations

import importlib

import pytest
import yaml

from pipeline import config
from pipeline.methods import BASELINES, REGISTRY, TABLE3_ROWS
from pipeline.stats import PAPER_FILE

PAPER = yaml.safe_load(PAPER_FILE.read_text())


@pytest.mark.parametrize("name", list(REGISTRY))
def test_entry_is_complete(name):
    entry = REGISTRY[name]
    assert entry.name == name and entry.label
    module, function = entry.builder.split(":")
    assert callable(getattr(importlib.import_module(module), function))
    for key, value in entry.fixed.items():  # what it fixes is a valid value of a known key
        check, allowed = config.HPARAM_RULES[key]
        assert check(value), (name, key, value, allowed)
    if name in BASELINES or entry.hparams_of in BASELINES:  # its network, and its settings its own (or that one's)
        assert entry.fixed["baseline"] == (entry.hparams_of or name)
        assert entry.table_keys is not None and not entry.chunk_independent
        assert {"lr", "weight_decay", "epochs", "early_stop_window"} <= set(entry.own_keys)
    else:  # CAD-Net's network with AdaCAD's three parts set
        assert {"transition", "propagation", "weighting"} <= set(entry.fixed) and entry.table_keys is None
        assert set(entry.own_keys) <= set(config.METHOD_RULES)
    assert set(entry.own_keys) <= set(config.HPARAM_RULES)
    table, row = entry.paper
    for dataset in ("citeseer", "cora", "pubmed"):  # every method has the paper's citation numbers
        mean, std = PAPER[table][row][dataset]
        assert 0 < mean < 100 and 0 < std < 10


def test_a_cells_code_identity_is_its_entrys_version_not_where_its_builder_lives(monkeypatch):
    """The spec holds a method's network version and the settings its entry fixes, never the
    builder's module path: moving or renaming the module keeps every seed."""
    from dataclasses import replace

    from conftest import SHIPPED_PARAMS
    from pipeline import spec

    cell = spec.config.Cell("main", "cora", "cadnet")
    before = spec.cell_spec(SHIPPED_PARAMS, cell)
    moved = replace(REGISTRY["cadnet"], builder="pipeline.models.cadnet:build")
    monkeypatch.setattr(spec, "REGISTRY", {**REGISTRY, "cadnet": moved})
    assert spec.cell_spec(SHIPPED_PARAMS, cell) == before
    monkeypatch.setattr(spec, "REGISTRY", {**REGISTRY, "cadnet": replace(moved, version=2)})
    assert spec.cell_spec(SHIPPED_PARAMS, cell)["code"]["network"] == 2


def test_table3_rows_are_registry_methods_in_the_paper_order():
    assert all(m in REGISTRY for m in TABLE3_ROWS)
    assert [REGISTRY[m].paper[1] for m in TABLE3_ROWS if m not in ("cadnet", "rw_pull")] == \
        ["rw", "symna", "ppr", "hk", "gat_rw", "tf_rw", "cad"]


def test_methods_differ_in_what_they_fix():
    """Two entries with the same builder and the same fixed settings would be one method twice."""
    seen = {}
    for name, entry in REGISTRY.items():
        key = (entry.builder, tuple(sorted(entry.fixed.items())))
        assert key not in seen, (name, seen.get(key))
        seen[key] = name


def test_mixhop_l2_is_mixhops_entry_with_the_lasso_held_at_zero():
    """Same builder, network, loop, paper row and settings block as MixHop; only the kernel
    lasso is fixed (to 0) instead of read, and its name and label say so."""
    mixhop, l2_only = REGISTRY["mixhop"], REGISTRY["mixhop_l2"]
    assert l2_only.hparams_of == "mixhop" and not mixhop.hparams_of
    assert l2_only.fixed == {**mixhop.fixed, "kernel_lasso": 0.0}
    assert l2_only.own_keys == tuple(k for k in mixhop.own_keys if k != "kernel_lasso")
    same = ("builder", "paper", "batched", "chunk_independent", "table_keys")
    assert [getattr(l2_only, f) for f in same] == [getattr(mixhop, f) for f in same]
    assert "mixhop_l2" not in BASELINES  # reported beside MixHop, not a twelfth method of Table 2
