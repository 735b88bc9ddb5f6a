"""The method registry (pipeline/models/registry.py): every entry is complete and consistent."""
from __future__ import annotations


import pytest
import yaml

from pipeline import config
from pipeline.models import BASELINES, REGISTRY, TABLE3_ROWS
from pipeline.stats import PAPER_FILE

PAPER = yaml.safe_load(PAPER_FILE.read_text())


@pytest.mark.parametrize("name", list(REGISTRY))
def test_entry_is_complete(name):
    entry = REGISTRY[name]
    assert entry.name == name and entry.label
    assert callable(entry.build)
    for key, value in entry.fixed.items():  # what it fixes is a valid value of a known key
        check, allowed = config.HPARAM_RULES[key]
        assert check(value), (name, key, value, allowed)
    if name in BASELINES or entry.hparams_of in BASELINES:  # its network, and its settings its own (or that one's)
        assert entry.fixed["baseline"] == (entry.hparams_of or name)
        assert entry.table_keys is not None and not entry.independent_of_chunk({})
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
    from pipeline.engine import spec

    cell = spec.config.Cell("main", "cora", "cadnet")
    before = spec.cell_spec(SHIPPED_PARAMS, cell)
    moved = replace(REGISTRY["cadnet"], builder=lambda *args: REGISTRY["cadnet"].build(*args))
    monkeypatch.setitem(REGISTRY, "cadnet", moved)
    assert spec.cell_spec(SHIPPED_PARAMS, cell) == before
    monkeypatch.setitem(REGISTRY, "cadnet", replace(moved, version=2))
    assert spec.cell_spec(SHIPPED_PARAMS, cell)["code"]["network"] == 2


def test_table3_rows_are_registry_methods_in_the_paper_order():
    assert all(m in REGISTRY for m in TABLE3_ROWS)
    assert [REGISTRY[m].paper[1] for m in TABLE3_ROWS if m not in ("cadnet", "rw_pull")] == \
        ["rw", "symna", "ppr", "hk", "gat_rw", "tf_rw", "cad"]


def test_methods_differ_in_what_they_fix():
    """Two entries with the same builder and the same fixed settings would be one method twice."""
    seen = {}
    for name, entry in REGISTRY.items():
        key = (entry.build, tuple(sorted(entry.fixed.items())))
        assert key not in seen, (name, seen.get(key))
        seen[key] = name


def test_mixhop_l2_is_mixhops_entry_with_the_lasso_held_at_zero():
    """Same builder, network, loop, paper row and settings block as MixHop; only the kernel
    lasso is fixed (to 0) instead of read, and its name and label say so."""
    mixhop, l2_only = REGISTRY["mixhop"], REGISTRY["mixhop_l2"]
    assert l2_only.hparams_of == "mixhop" and not mixhop.hparams_of
    assert l2_only.fixed == {**mixhop.fixed, "kernel_lasso": 0.0}
    assert l2_only.own_keys == tuple(k for k in mixhop.own_keys if k != "kernel_lasso")
    same = ("builder", "settings", "paper", "batched", "chunk_independent", "table_keys")
    assert [getattr(l2_only, f) for f in same] == [getattr(mixhop, f) for f in same]
    assert "mixhop_l2" not in BASELINES  # reported beside MixHop, not a twelfth method of Table 2


# Tables B.12-B.14: how far each method reaches at range r (the grid key `range`), in hops of a
# path graph: r for the layered networks and the r-step propagations; Cheby's two layers of
# Chebyshev filter size r reach r - 1 hops each; CAD-Net's r steps carry class scores r hops, and
# its transition's softmax over each node's neighbours (Eq. 4) looks one hop further.
REACH = {"gcn": lambda r: r, "sage": lambda r: r, "jknet": lambda r: r, "gat": lambda r: r, "agnn": lambda r: r,
         "sgc": lambda r: r, "appnp": lambda r: r, "cheb": lambda r: 2 * r, "cadnet": lambda r: r + 1}


def path_graph(n: int = 16, features: int = 5, classes: int = 3) -> dict:
    """Nodes 0 - 1 - ... - n-1 with self-loops (the graph file's form), positive features."""
    import torch

    g = torch.Generator().manual_seed(0)
    line = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    edges = torch.cat([line, line.flip(0), torch.arange(n).repeat(2, 1)], dim=1)
    x = torch.rand(n, features, generator=g) + 0.1
    return {"x": (x / x.sum(1, keepdim=True)).to_sparse().coalesce(), "edge_index": edges,
            "y": torch.arange(n) % classes, "num_classes": classes}


def scores_at_node_0(graph: dict, method: str, hp: dict):
    import torch

    from pipeline.engine.loop import build_net

    with torch.no_grad():
        return build_net(graph, hp, method, [0], batched=False).eval()().log_probs[0, 0]


@pytest.mark.parametrize("method", sorted(REACH))
@pytest.mark.parametrize("r", [2, 3])
def test_a_methods_range_is_how_far_it_sees(method, r):
    """Node 0's output moves with the features of the node at its reach and not of the node one
    hop further, for the range setting of each method's registry entry."""
    import torch

    from test_baselines import settings
    from test_adacad_batched import hparams

    key = REGISTRY[method].range_key
    hp = hparams(method) if method == "cadnet" else settings(method, p_drop=0.0, edge_drop=0.0)
    hp[key] = REGISTRY[method].setting_for_range(r)
    graph = path_graph()
    reach = REACH[method](r)
    base = scores_at_node_0(graph, method, hp)
    for far, moves in ((reach, True), (reach + 1, False)):
        changed = {**graph, "x": graph["x"].to_dense().index_put_((torch.tensor([far]),), torch.rand(5) + 2)}
        changed["x"] = changed["x"].to_sparse().coalesce()
        moved = not torch.allclose(scores_at_node_0(changed, method, hp), base, atol=1e-7, rtol=0)
        assert moved == moves, (method, r, far)


def test_only_the_ranges_methods_have_a_range():
    assert {name for name, entry in REGISTRY.items() if entry.range_key} == set(REACH)


@pytest.mark.parametrize("method", ["gcn", "sage", "gat", "agnn"])
def test_the_range_of_table_2_is_table_2s_network(method):
    """GCN, SAGE and GAT at 2 layers and AGNN at 2 propagation layers, set by the ranges study,
    compute what their Table 2 networks (no such key) compute: the same weights, the same numbers."""
    import torch

    from test_baselines import settings

    graph, hp = path_graph(), settings(method, p_drop=0.0)
    hp.pop("layers")
    ranged = {**hp, REGISTRY[method].range_key: 2}
    torch.testing.assert_close(scores_at_node_0(graph, method, ranged), scores_at_node_0(graph, method, hp),
                               rtol=0, atol=0)
    assert not torch.equal(scores_at_node_0(graph, method, {**hp, REGISTRY[method].range_key: 3}),
                           scores_at_node_0(graph, method, hp))


def test_a_method_is_one_file_the_readmes_example(tmp_path):
    """The README's `pipeline/models/mlp.py`, dropped into a copy of the package and touching no
    other module, is a registered baseline: a column of Table 2, its settings checked against its
    schema (one line naming the key), and trained seed-stacked by the loop."""
    import re
    import shutil
    import subprocess
    import sys

    from conftest import PROJECT_ROOT

    readme = (PROJECT_ROOT / "README.md").read_text()
    example = re.search(r"`pipeline/models/mlp\.py`:\n\n```python\n(.*?)```", readme, re.S).group(1)
    shutil.copytree(PROJECT_ROOT / "pipeline", tmp_path / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pipeline" / "models" / "mlp.py").write_text(example)
    script = f"""
import copy, sys, yaml
sys.path.insert(0, {str(PROJECT_ROOT / "tests")!r})
from conftest import SHIPPED_PARAMS
from test_adacad_batched import synthetic_graph
from pipeline import config
from pipeline.engine.loop import train_chunk
from pipeline.models import BASELINES, REGISTRY
assert config.METHODS[-1] == "mlp" and BASELINES[-1] == "mlp" and REGISTRY["mlp"].label == "MLP", config.METHODS
params = copy.deepcopy(SHIPPED_PARAMS)
params["method_hparams"]["mlp"] = dict(hidden=8, p_drop=0.5, lr=0.01, weight_decay=5e-4, epochs=3,
                                       early_stop_window=0, layers=3)
hp = config.hparams_for(params, "cora", "mlp")
assert hp["layers"] == 3 and hp["baseline"] == "mlp", hp
params["method_hparams"]["mlp"]["layers"] = 1
try:
    config.hparams_for(params, "cora", "mlp")
except config.ConfigError as err:
    print(err)
records = train_chunk(synthetic_graph(), {{**hp, "split": "per_class", "train_per_class": 4, "val_per_class": 4}},
                      [0, 1], "cpu", "mlp")
print(len(records), records[0]["engine"], records[0]["epochs_run"])
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["method_hparams.mlp.layers: got 1; allowed values: an integer in [2, 8]",
                                        "2 batched (chunk of 2) 3"]


@pytest.mark.parametrize("module", ["pipeline.download", "pipeline.evaluate"])
def test_the_stages_that_name_no_method_load_no_network_code(module):
    """Download runs once a dataset and evaluate once a family (hundreds of stages): they load
    the registry, whose modules import torch (seconds a process), only if they name a method."""
    import subprocess
    import sys

    from conftest import PROJECT_ROOT

    done = subprocess.run([sys.executable, "-c", f"import sys, {module}; print('torch' in sys.modules)"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr[-2000:]
