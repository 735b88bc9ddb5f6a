"""Code identity (pipeline/engine/spec.py): the versions that stand for the code behind a cell's numbers.

A version survives what does not move numbers (a moved function, a renamed module, a docstring)
because it is a constant, not a hash of source files. The other direction is held here: every
method is trained on a tiny graph with its Cora settings as they were recorded (dropout on, early
stopping able to fire), and the per-epoch losses, stopping epochs and accuracies must be those
recorded in ``tests/golden_outputs.json`` for the versions it has now. A change that moves them without a new
version fails; after bumping the version of what changed (the method's ``version`` in
pipeline/models/registry.py, or an entry of ``spec.COMPONENTS``), record the new outputs with
``python tests/test_spec.py``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: conftest and test_batched
from conftest import SHIPPED_PARAMS  # noqa: E402
from pipeline import config, preprocess  # noqa: E402
from pipeline.engine import loop  # noqa: E402
from pipeline.engine import spec  # noqa: E402
from pipeline.models import REGISTRY  # noqa: E402
from test_adacad_batched import synthetic_graph  # noqa: E402

GOLDEN = Path(__file__).with_name("golden_outputs.json")
SEEDS = [0, 1]
# These losses agree within 1.7e-6 between CPU kernels (measured with ATEN_CPU_CAPABILITY and
# MKL_ENABLE_INSTRUCTIONS set to AVX-512, AVX2 and the plain default); Adam without amsgrad, the
# smallest planted change tried, moves them by 5e-6 to 2.5e-5, a dropout site or the stopping rule
# by far more. The same thread count or not, they are equal.
TOLERANCE = 5e-6
# The shared code each case's numbers come from besides its network; a method's own version is
# its network's.
RUNS = {method: ("loop", "splits") for method in REGISTRY}
RUNS.update({"cadnet, random splits": ("loop", "splits"), "gcn, features as read": ("loop", "splits", "features"),
             "graph from raw files": ("graph",)})
# the baselines' sparse implementation (pipeline/models/sparse_baselines.py; Graph U-Net's: its
# features sparse, baselines.UNet)
RUNS.update({f"{method}, sparse": ("loop", "splits") for method in ("gcn", "sgc", "appnp", "gdc", "cheb", "sage",
                                                                    "jknet", "gat", "agnn", "graph_unet")})
RUNS["sgc, sparse weights first"] = ("loop", "splits")  # SGC's other order of products


def settings(method: str, **changes) -> dict:
    """The method's Cora settings, shortened to 20 epochs with an early-stopping window of 2
    (the rule may fire from epoch 11), and ``changes``; MixHop's output widths for 3 classes."""
    hp = config.hparams_for(SHIPPED_PARAMS, "cora", method)
    hp.update(epochs=20, early_stop_window=2, **changes)
    if "output_per_power" in hp:  # MixHop's output widths split over the tiny graph's 3 classes
        hp["output_per_power"] = [0, 3, 3]
    hp.pop("seed_chunk", None)
    return hp


def graph_from_raw() -> dict:
    """preprocess.build_graph on a small PyG graph: duplicate and one-way edges, a self-loop, and
    features whose rows sum to more than one."""
    from torch_geometric.data import Data

    x = torch.tensor([[3.0, 0.0, 1.0], [0.0, 2.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    edges = torch.tensor([[0, 1, 1, 2, 3, 3], [1, 0, 2, 2, 0, 0]])
    data = Data(x=x, edge_index=edges, y=torch.tensor([0, 1, 0, 1]))
    graph, _ = preprocess.build_graph(data, {"self_loops": True, "normalize_features": "clamped_sum"})
    return {"edges": graph["edge_index"].flatten().tolist(), "x": graph["x"].to_dense().flatten().tolist()}


def case_settings(case: str) -> dict | None:
    """The settings a case trains with, from params.yaml as it is (the golden file keeps those
    it was recorded with, so that a new value in params.yaml moves no golden output)."""
    if case == "graph from raw files":
        return None
    if case == "cadnet, random splits":
        return settings("cadnet", split="per_class", train_per_class=4, val_per_class=4)
    method = case.split(",")[0]
    if case.endswith(", sparse"):
        return settings(method, implementation="sparse")
    if case.endswith(", sparse weights first"):
        return settings(method, implementation="sparse", product_order="weights_first")
    if "implementation" in settings(method):  # the PyG network, vmapped, whatever params select
        return settings(method, implementation="vmap")
    return settings(method)


def outputs(case: str, hp: dict | None) -> dict:
    """What the golden file records of one case trained with ``hp``."""
    if case == "graph from raw files":
        return graph_from_raw()
    graph = synthetic_graph()
    method = case.split(",")[0]
    if case == "gcn, features as read":
        counts = (graph["x"].to_dense() > 0).float() * torch.arange(1.0, graph["x"].size(1) + 1)
        graph = {**graph, "x": preprocess.sparse_features(counts, "sum")}
    records = loop.train_chunk(graph, hp, SEEDS, "cpu", method, batched=REGISTRY[method].batched_for(hp))
    return {str(r["seed"]): {"epochs_run": r["epochs_run"], "selected_epoch": r["selected_epoch"],
                             "test_acc": r["test_acc"], "train_loss": r["history"]["train_loss"],
                             "val_loss": r["history"]["val_loss"]} for r in records}


def versions(case: str, hp: dict | None) -> dict:
    """The versions the code has now for ``case`` trained with ``hp`` (a baseline's network
    version depends on the implementation its settings select)."""
    found = {name: spec.COMPONENTS[name] for name in RUNS[case]}
    method = case.split(",")[0]
    if method in REGISTRY:
        found["network"] = REGISTRY[method].version_for(hp or {})
    return found


def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_every_method_and_shared_component_has_a_golden_case():
    assert set(golden()) == set(RUNS)
    assert set().union(*RUNS.values()) == set(spec.COMPONENTS)


@pytest.mark.parametrize("case", sorted(RUNS))
def test_numbers_move_only_with_a_new_version(case):
    recorded = golden()[case]
    now = versions(case, recorded["settings"])
    assert recorded["versions"] == now, (
        f"{case}: versions {now} but {GOLDEN.name} holds outputs of {recorded['versions']}; "
        f"record the new version's outputs with `python tests/test_spec.py`")
    ours = json.loads(json.dumps(outputs(case, recorded["settings"])))
    assert ours.keys() == recorded["outputs"].keys()
    for key, expected in recorded["outputs"].items():
        moved = ours[key] != pytest.approx(expected, rel=0, abs=TOLERANCE) if case == "graph from raw files" else [
            field for field, value in expected.items()
            if ours[key][field] != (value if "epoch" in field else pytest.approx(value, rel=0, abs=TOLERANCE))]
        assert not moved, (
            f"{case}: {key} {moved or ''} moved while its versions {now} did not; bump the version of the code "
            f"that changed (its method's `version` in pipeline/models/registry.py or spec.COMPONENTS), then "
            f"`python tests/test_spec.py`")


def test_a_cells_identity_is_its_spec_without_the_count_of_seeds_and_the_tables_layout():
    params = SHIPPED_PARAMS
    cadnet = spec.cell_spec(params, config.Cell("main", "cora", "cadnet"))
    assert spec.seed_identity({**cadnet, "runs": 3}) == spec.seed_identity(cadnet)
    assert spec.seed_identity({**cadnet, "tables": 99}) == spec.seed_identity(cadnet)
    # a cell of another study with the same settings trains the same seeds; a grid value is a setting
    assert spec.seed_identity({**cadnet, "study": "rates", "setting": {"train_per_class": 20}}) == spec.seed_identity(cadnet)
    for key, value in (("code", {**cadnet["code"], "loop": 2}), ("settings", {**cadnet["settings"], "beta": 0.5}),
                       ("data", {**cadnet["data"], "raw_sha256": []})):
        assert spec.seed_identity({**cadnet, key: value}) != spec.seed_identity(cadnet), key
    assert cadnet["code"] == {**spec.COMPONENTS, "network": REGISTRY["cadnet"].version}


def test_a_stale_spec_stops_a_stage_run_by_hand(workdir):
    from pipeline import check

    params = config.load_params()
    check.write_specs(params)
    assert [s["runs"] for s in spec.current_family(params, "cora", "cadnet") if s["study"] == "main"] == [params["runs"]]
    with pytest.raises(config.ConfigError, match=r"data/specs/cora/cadnet/main\.json: written for other settings"):
        spec.current_family({**params, "beta": 0.5}, "cora", "cadnet")
    grid = {**params["studies"], "b": {"datasets": ["cora"], "methods": ["cadnet"], "runs": 1, "grid": {"beta": [0.5]}}}
    with pytest.raises(config.ConfigError, match=r"data/specs/cora/cadnet/_cells\.json: written for other settings"):
        spec.current_family({**params, "studies": grid}, "cora", "cadnet")


if __name__ == "__main__":  # record the outputs of the versions the code has now
    cases = {case: {"settings": case_settings(case)} for case in sorted(RUNS)}
    for case, entry in cases.items():
        entry["versions"], entry["outputs"] = versions(case, entry["settings"]), outputs(case, entry["settings"])
    GOLDEN.write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
