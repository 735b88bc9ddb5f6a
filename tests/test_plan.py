"""pipeline/engine/plan.py: what will be trained, and how long it will take, said before training."""
from __future__ import annotations

import shutil

import pytest

from pipeline import config
from pipeline.engine import plan


def cell_table(folder, method, name="main"):
    """Where train writes the per-seed table of ``method``'s cell ``name`` in a dataset's ``folder``."""
    (folder / method).mkdir(parents=True, exist_ok=True)
    return folder / method / f"{name}.csv"


def write_table(root, dataset, method, rows):
    """A per-seed table as train writes it: (epochs_run, ms_per_seed_epoch, device) per seed."""
    lines = ["seed,test_acc,epochs_run,ms_per_seed_epoch,device"]
    lines += [f"{seed},0.8,{epochs},{ms},{device}" for seed, (epochs, ms, device) in enumerate(rows)]
    cell_table(root / dataset, method).write_text("\n".join(lines) + "\n")


def test_estimate_uses_the_committed_per_seed_table_and_falls_back_to_cadnet(tmp_path):
    table = tmp_path / "cora"
    table.mkdir()
    cell_table(table, "cadnet").write_text("seed,test_acc,epochs_run,ms_per_seed_epoch\n0,0.8,100,10.0\n1,0.8,50,20.0\n")
    # 1 s per seed (100 x 10 ms and 50 x 20 ms): 120 seeds, 2 minutes
    assert plan.estimate("cora", "cadnet", 120, tmp_path).startswith("~2.0 min")
    borrowed = plan.estimate("cora", "rw", 120, tmp_path)  # rw never ran: CAD-Net's figure, said to be borrowed
    assert "cora/cadnet" in borrowed and "no figure of its own" in borrowed
    assert "no figure of its own" not in plan.estimate("cora", "cadnet", 120, tmp_path)
    assert "no measured figure for pubmed" in plan.estimate("pubmed", "cadnet", 10, tmp_path)
    assert plan.estimate("cora", "cadnet", 0, tmp_path) == "nothing to train"


def test_an_estimate_from_a_gpu_measured_table_says_so(tmp_path):
    table = tmp_path / "physics"
    table.mkdir()
    cell_table(table, "cadnet").write_text("seed,test_acc,epochs_run,ms_per_seed_epoch,device\n"
                                      "0,0.9,100,10.0,cuda (NVIDIA H200)\n")
    assert plan.estimate("physics", "cadnet", 60, tmp_path, device="cuda").endswith("of physics/cadnet on cuda (NVIDIA H200))")
    # for a CPU run, the only figure there is is labelled as another machine's
    assert plan.estimate("physics", "cadnet", 60, tmp_path).endswith(
        "of physics/cadnet on cuda (NVIDIA H200), measured on another kind of machine than this cpu: expect another time)")
    cell_table(table, "cadnet").write_text("seed,test_acc,epochs_run,ms_per_seed_epoch,device\n0,0.9,100,10.0,cpu\n")
    assert plan.estimate("physics", "cadnet", 60, tmp_path).endswith("of physics/cadnet)")


def test_an_estimate_uses_the_seeds_of_its_own_device_kind_where_there_are_any(tmp_path):
    table = tmp_path / "photo"
    table.mkdir()
    cell_table(table, "cadnet").write_text("seed,test_acc,epochs_run,ms_per_seed_epoch,device\n"
                                      "0,0.9,100,100.0,cpu\n1,0.9,100,4.0,cuda (NVIDIA H200)\n")
    assert plan.estimate("photo", "cadnet", 60, tmp_path) == "~10.0 min (at the committed run's 10.0 s per seed of photo/cadnet)"
    assert plan.estimate("photo", "cadnet", 60, tmp_path, device="cuda").startswith("~24 s")
    assert plan.estimate("photo", "cadnet", 60, tmp_path, device="cuda").endswith("on cuda (NVIDIA H200))")
    cell_table(table, "cadnet").write_text("seed,test_acc,epochs_run,ms_per_seed_epoch,device\n"
                                      "0,0.9,100,4.0,cuda (NVIDIA H200)\n")
    assert plan.estimate("photo", "cadnet", 60, tmp_path).startswith("~24 s")  # no CPU seeds: the GPU's figure, so labelled
    assert "another kind of machine than this cpu" in plan.estimate("photo", "cadnet", 60, tmp_path)


def test_a_cpu_plan_prefers_a_borrowed_cpu_figure_to_a_cells_own_gpu_figure(tmp_path):
    """Physics GCN ran on the H200 only: a CPU run is costed from GCN's CPU figure on CS scaled
    by CAD-Net's cost here over there, not from the H200's 20x faster one."""
    write_table(tmp_path, "physics", "cadnet", [(100, 20.0, "cpu")])
    write_table(tmp_path, "physics", "gcn", [(100, 1.0, "cuda (NVIDIA H200)")])
    write_table(tmp_path, "cs", "cadnet", [(100, 10.0, "cpu")])
    write_table(tmp_path, "cs", "gcn", [(100, 10.0, "cpu")])
    assert plan.estimate("physics", "gcn", 10, tmp_path) == (
        "~20 s (at the committed run's 2.0 s per seed of cs/gcn scaled by 2.00, CAD-Net's cost per epoch on physics "
        "over cs; this cell has no figure of its own, and methods do not scale alike)")
    assert plan.estimate("physics", "gcn", 10, tmp_path, device="cuda").startswith("~1 s")


def test_an_entry_reading_anothers_settings_borrows_that_ones_figure_here(tmp_path):
    """mixhop_l2 is MixHop's network with one setting changed: MixHop's figure on the same
    dataset (2 s per seed), not CAD-Net's (0.1 s)."""
    write_table(tmp_path, "cora", "cadnet", [(100, 1.0, "cpu")])
    write_table(tmp_path, "cora", "mixhop", [(400, 5.0, "cpu")])
    assert plan.estimate("cora", "mixhop_l2", 60, tmp_path) == (
        "~2.0 min (at the committed run's 2.0 s per seed of cora/mixhop, the same network)")


def test_a_cell_never_run_borrows_its_methods_figure_on_the_nearest_dataset_scaled_by_cadnets_cost(tmp_path):
    """GCN on Computers has no figure: GCN's on Photo (100 s per seed), times CAD-Net's cost per
    epoch on Computers over Photo (300 / 150 ms = 2), not over Cora (whose CAD-Net epoch is far
    cheaper), and not CAD-Net's own figure; figures of another device kind are not scaled."""
    write_table(tmp_path, "photo", "cadnet", [(100, 150.0, "cpu")])
    write_table(tmp_path, "photo", "gcn", [(500, 200.0, "cpu")])  # 100 s per seed
    write_table(tmp_path, "cora", "cadnet", [(100, 10.0, "cpu")])
    write_table(tmp_path, "cora", "gcn", [(200, 5.0, "cpu")])  # 1 s per seed
    write_table(tmp_path, "computers", "cadnet", [(400, 300.0, "cpu")])  # CAD-Net's epochs do not count
    seconds, source = plan.measured_per_seed("computers", "gcn", tmp_path)
    assert seconds == 200.0
    assert source.startswith("photo/gcn scaled by 2.00") and "no figure of its own" in source
    assert plan.estimate("computers", "gcn", 6, tmp_path).startswith("~20.0 min")

    write_table(tmp_path, "photo", "gcn", [(500, 2.0, "cuda (NVIDIA H200)")])  # a GPU's figure is not scaled
    seconds, source = plan.measured_per_seed("computers", "gcn", tmp_path)
    assert source.startswith("cora/gcn scaled by 30.00") and seconds == 30.0
    write_table(tmp_path, "cora", "gcn", [(200, 5.0, "cuda (NVIDIA H200)")])
    seconds, source = plan.measured_per_seed("computers", "gcn", tmp_path)  # no donor left: CAD-Net's own
    assert source.startswith("computers/cadnet;") and seconds == 120.0


def write_seconds(root, dataset, method, seconds_per_seed, device="cpu"):
    write_table(root, dataset, method, [(100, seconds_per_seed * 10, device)])  # 100 epochs of 10x ms


def test_a_baseline_never_run_is_scaled_by_the_other_baselines_cost_here_over_there(tmp_path):
    """MixHop on Computers: on Photo 100 s per seed, where GCN, SAGE and JK-Net cost 3x, 2x and 10x
    less than on Computers (median 3): 300 s; on Cora 40 s, where they cost 30x, 20x and 100x less
    (median 30): 1200 s; the geometric mean of the two, 600 s. CAD-Net's cost ratio (here 1000x)
    is not used; a dataset whose peers did not run there, or ran on a GPU, gives no figure."""
    baselines = ["gcn", "sage", "jknet", "mixhop"]
    for dataset, cadnet, gcn, sage, jknet, mixhop in [("computers", 1000, 30, 40, 10, None),
                                                      ("photo", 1, 10, 20, 1, 100), ("cora", 1, 1, 2, 0.1, 40)]:
        for method, seconds in [("cadnet", cadnet), ("gcn", gcn), ("sage", sage), ("jknet", jknet), ("mixhop", mixhop)]:
            if seconds is not None:
                write_seconds(tmp_path, dataset, method, seconds)
    write_seconds(tmp_path, "cs", "mixhop", 7)  # no other baseline ran on CS
    write_seconds(tmp_path, "physics", "mixhop", 9)
    write_seconds(tmp_path, "physics", "gcn", 1, device="cuda (NVIDIA H200)")
    seconds, source = plan.measured_per_seed("computers", "mixhop", tmp_path, baselines=baselines)
    assert seconds == pytest.approx(600.0)
    assert source.startswith("cora/mixhop x30.00, photo/mixhop x3.00, the other baselines' median cost")
    assert "no figure of its own" in source
    assert plan.estimate("computers", "mixhop", 6, tmp_path, baselines=baselines).startswith("~60.0 min")

    seconds, source = plan.measured_per_seed("computers", "mixhop", tmp_path)  # not told the baselines
    assert source.startswith("cora/mixhop scaled by 1000.00") and seconds == 40_000.0
    seconds, source = plan.measured_per_seed("computers", "mixhop", tmp_path, baselines=["mixhop"])  # no peers
    assert source.startswith("cora/mixhop scaled by 1000.00") and seconds == 40_000.0
    assert plan.measured_per_seed("computers", "mixhop", tmp_path / "no-run-yet", baselines=baselines) is None


def test_a_peer_of_another_implementation_on_the_other_dataset_does_not_scale_a_baseline(tmp_path):
    """SGC sparse on Cora (0.1 s a seed) and vmapped on CS (100 s): a ratio of implementations.
    Given the params, only GCN (vmapped on both) scales Graph U-Net from Cora to CS (x10)."""
    baselines = ["gcn", "sgc", "graph_unet"]
    for dataset, gcn, sgc, unet in [("cora", 1, 0.1, 50), ("cs", 10, 100, None)]:
        for method, seconds in [("cadnet", 1), ("gcn", gcn), ("sgc", sgc), ("graph_unet", unet)]:
            if seconds is not None:
                write_seconds(tmp_path, dataset, method, seconds)
    params = config.load_params()
    params["method_hparams"]["sgc"]["cora"] = {"implementation": "sparse"}
    params["method_hparams"]["sgc"].pop("cs", None)
    params["method_hparams"]["gcn"] = {k: v for k, v in params["method_hparams"]["gcn"].items() if k not in ("cora", "cs")}
    seconds, source = plan.measured_per_seed("cs", "graph_unet", tmp_path, baselines=baselines, params=params)
    assert source.startswith("cora/graph_unet x10.00") and seconds == pytest.approx(500.0)
    seconds, _ = plan.measured_per_seed("cs", "graph_unet", tmp_path, baselines=baselines)  # no params: both peers
    assert seconds == pytest.approx(50 * (10 + 1000) / 2)  # the median of x10 and x1000


def test_a_family_never_run_is_costed_by_the_benchmarks_figure_times_its_configured_epochs(tmp_path):
    """Graph U-Net on CS has no seeds; the CPU benchmark measured 2,000 ms a seed-epoch there:
    with the params, its configured 1,000 epochs (Shchur et al.'s protocol there; early stopping
    can only shorten them) give 2,000 s a seed; without, no epochs to use."""
    eval_root = tmp_path / "eval"
    write_table(eval_root, "cs", "cadnet", [(100, 10.0, "cpu")])
    bench = tmp_path / "bench" / "cpu" / "cs.json"
    bench.parent.mkdir(parents=True)
    bench.write_text('{"methods": {"figures": [{"method": "graph_unet", "batched": null, "single": 2000.0}]}}')
    params = config.load_params()
    assert config.hparams_for(params, "cs", "graph_unet")["epochs"] == 1000
    seconds, source = plan.measured_per_seed("cs", "graph_unet", eval_root, params=params)
    assert seconds == pytest.approx(2000.0) and "its configured 1000 epochs a seed" in source
    assert plan.measured_per_seed("cs", "graph_unet", eval_root)[1].startswith("cs/cadnet")


def test_a_family_never_run_takes_the_epochs_its_peers_ran_under_the_same_rule(tmp_path):
    """Physics's ChebNet was costed at its configured 1,000 epochs and stopped at 501-560: the
    early-stopping rule waits half the budget. A family never run takes the median epochs a seed
    of the dataset's families ran under the same budget and window (GCN 510, SGC 900, JK-Net 530:
    530), not CAD-Net's (100 epochs, window 20 on CS: another rule); with no such peer, its
    configured epochs."""
    eval_root = tmp_path / "eval"
    for method, epochs in [("cadnet", 100), ("gcn", 510), ("sgc", 900), ("jknet", 530)]:
        write_table(eval_root, "cs", method, [(epochs, 10.0, "cpu")])
    bench = tmp_path / "bench" / "cpu" / "cs.json"
    bench.parent.mkdir(parents=True)
    bench.write_text('{"methods": {"figures": [{"method": "cheb", "batched": 200.0, "single": 500.0}]}}')
    params = config.load_params()
    assert config.hparams_for(params, "cs", "cadnet")["epochs"] != config.hparams_for(params, "cs", "cheb")["epochs"]
    seconds, source = plan.measured_per_seed("cs", "cheb", eval_root, params=params)
    assert seconds == pytest.approx(200 * 530 / 1000) and "its 3 peers' (same budget and stopping rule) median 530 epochs" in source
    params["method_hparams"]["sgc"]["cs"] = dict(params["method_hparams"]["sgc"].get("cs") or {}, early_stop_window=0)
    seconds, _ = plan.measured_per_seed("cs", "cheb", eval_root, params=params)
    assert seconds == pytest.approx(200 * (510 + 530) / 2 / 1000)  # SGC's rule is another now
    for method in ("gcn", "sgc", "jknet"):
        shutil.rmtree(eval_root / "cs" / method)
    seconds, source = plan.measured_per_seed("cs", "cheb", eval_root, params=params)
    assert seconds == pytest.approx(200.0) and "its configured 1000 epochs a seed" in source


def test_a_batched_family_without_its_batched_figure_is_not_costed_by_its_reference_network(tmp_path):
    """Physics's GAT trains batched; the benchmark timed its one-seed reference network (PyG's
    layers, dense features) at 14 s an epoch and its batched chunk ran out of time: that figure
    is not the cost of the network the cells train, so the estimate borrows CAD-Net's instead.
    Graph U-Net, which trains one seed at a time, takes its one-seed figure."""
    eval_root = tmp_path / "eval"
    write_table(eval_root, "physics", "cadnet", [(100, 10.0, "cpu")])  # 1 s a seed
    bench = tmp_path / "bench" / "cpu" / "physics.json"
    bench.parent.mkdir(parents=True)
    bench.write_text('{"methods": {"figures": [{"method": "gat", "batched": null, "single": 14000.0}, '
                     '{"method": "graph_unet", "batched": null, "single": 2000.0}]}}')
    params = config.load_params()
    seconds, source = plan.measured_per_seed("physics", "gat", eval_root, params=params)
    assert source.startswith("physics/cadnet") and seconds == pytest.approx(1.0)  # 100 epochs at 10 ms
    seconds, source = plan.measured_per_seed("physics", "graph_unet", eval_root, params=params)
    assert seconds == pytest.approx(2000.0) and "the benchmark's 2000.0 ms" in source
    bench.write_text('{"methods": {"figures": [{"method": "gat", "batched": 3000.0, "single": 14000.0}]}}')
    assert plan.measured_per_seed("physics", "gat", eval_root, params=params)[0] == pytest.approx(3000.0)


def write_sizes(root, dataset, nodes, directed_edges, features):
    root.mkdir(exist_ok=True)
    (root / f"{dataset}.json").write_text(
        f'{{"nodes": {nodes}, "directed_edges": {directed_edges}, "features": {features}, "classes": 3}}')


def test_the_first_propagation_of_the_input_features_is_sized_by_its_message_copies(tmp_path):
    # 10 nodes, 30 directed edges: 40 messages with the self-loops. SGC's layer holds the
    # gathered and the weighted messages (2 x 40 rows) besides 3 node-sized copies; SAGE's mean
    # only the gathered ones; GCN shrinks the features first and is not sized here.
    write_sizes(tmp_path, "tiny", nodes=10, directed_edges=30, features=100)
    assert plan.feature_messages_peak_bytes("tiny", "sgc", tmp_path) == 4 * 100 * (2 * 40 + 3 * 10)
    assert plan.feature_messages_peak_bytes("tiny", "sage", tmp_path) == 4 * 100 * (40 + 3 * 10)
    assert plan.feature_messages_peak_bytes("tiny", "gcn", tmp_path) is None
    assert plan.feature_messages_peak_bytes("unknown", "sgc", tmp_path) is None


def test_the_plan_warns_where_one_seed_would_pass_the_machines_memory(tmp_path):
    # Physics' sizes: SGC was killed there with one seed on a 23 GB machine; CS's ran
    write_sizes(tmp_path, "physics", nodes=34493, directed_edges=495924, features=8415)
    write_sizes(tmp_path, "cs", nodes=18333, directed_edges=163788, features=6805)
    memory = 23 * 10**9
    warning = plan.memory_warning("physics", "sgc", memory, tmp_path)
    assert warning.startswith("warning: physics/sgc") and "36 GiB" in warning and "21 GiB" in warning
    assert plan.memory_warning("cs", "sgc", memory, tmp_path) is None
    assert plan.memory_warning("physics", "gcn", memory, tmp_path) is None
    assert plan.memory_warning("physics", "sgc", None, tmp_path) is None  # memory unknown: no guess
    assert plan.memory_warning("physics", "sgc", memory, tmp_path, hp={"implementation": "vmap"}) == warning
    assert plan.memory_warning("physics", "sgc", memory, tmp_path, hp={"implementation": "sparse"}) is None


@pytest.mark.parametrize("single_engine, device, n_jobs, expected",
                         [(True, "cpu", 2, 2), (True, "cpu", 1, 1), (False, "cpu", 2, 1), (True, "cuda", 2, 1)])
def test_only_the_single_engine_on_cpu_trains_seeds_side_by_side(single_engine, device, n_jobs, expected):
    assert plan.workers_side_by_side(single_engine, device, n_jobs) == expected


@pytest.mark.parametrize("device, workers, peak_gb, expected",
                         [("cpu", 2, 1, 2), ("cpu", 4, 2, 3), ("cpu", 2, 4, 1), ("cpu", 2, 7, 1), ("cpu", 1, 1, 1),
                          ("cuda", 2, 1, 1)])
def test_batched_chunks_side_by_side_fit_the_memory_budget_together(device, workers, peak_gb, expected):
    """chunk_workers on a CPU, as many as 6 GB holds of the chunks' estimated peaks (at least one)."""
    assert plan.chunk_workers(device, workers, peak_gb * 2**30, 6 * 2**30) == expected


def test_seeds_trained_side_by_side_in_workers_divide_the_estimate(tmp_path):
    write_table(tmp_path, "cora", "agnn", [(100, 600.0, "cpu")])  # 60 s per seed, in its worker
    assert plan.estimate("cora", "agnn", 4, tmp_path).startswith("~4.0 min")
    two = plan.estimate("cora", "agnn", 4, tmp_path, side_by_side=2)
    assert two.startswith("~2.0 min") and "2 worker processes side by side" in two
    assert plan.estimate("cora", "agnn", 1, tmp_path, side_by_side=2).startswith("~60 s")  # one seed: no one beside it


def test_a_familys_figure_pools_the_seeds_of_its_cells(tmp_path):
    """Every cell of a (dataset, method) trains the same network: their seeds are one figure."""
    cell_table(tmp_path / "cora", "cadnet").write_text("seed,test_acc,epochs_run,ms_per_seed_epoch\n0,0.8,100,10.0\n")
    cell_table(tmp_path / "cora", "cadnet", "beta-beta=0.5").write_text(
        "seed,test_acc,epochs_run,ms_per_seed_epoch\n0,0.8,100,30.0\n")
    cell_table(tmp_path / "cora", "cadnet", "beta-beta=0.5_epochs").write_text("epoch,seeds_running\n0,1\n")
    assert plan.estimate("cora", "cadnet", 60, tmp_path).startswith("~2.0 min")  # 2 s per seed: (1 + 3) / 2


def test_a_cell_without_figures_costs_its_familys_figure_scaled_up_by_a_longer_range_or_wider_layer(workdir, monkeypatch):
    """A cell with committed seeds of its own costs their figure; one without, its family's
    times the square root of each ratio of range and hidden width to Table 2's, where larger."""
    params = config.load_params()
    monkeypatch.setattr(plan, "measured_per_seed", lambda dataset, method, **k: (4.0, "family"))
    monkeypatch.setattr(plan, "cell_per_seed", lambda dataset, method, cell, **k: 9.0 if cell == "measured" else None)
    gcn = config.hparams_for(params, "cora", "gcn")
    assert "layers" not in gcn and gcn["hidden"] == 16  # Table 2's GCN: its schema's 2 layers, 16 wide
    cost = {cell: plan.cell_measured(params, config.Cell(*cell))[0] for cell in [
        ("ranges", "cora", "gcn", (("range", 8),)),  # 4 times the layers: twice the cost
        ("ranges", "cora", "gcn", (("range", 2),)),  # Table 2's own range
        ("hidden_units", "cora", "gcn", (("hidden", 64),)),  # 4 times as wide
        ("hidden_units", "cora", "appnp", (("hidden", 16),)),  # narrower than Table 2's 64: not cheaper
        ("label_rates", "cora", "gcn", (("train_per_class", 5),)),  # same network
    ]}
    assert list(cost.values()) == [8.0, 4.0, 8.0, 4.0, 4.0]
    assert plan.cell_measured(params, config.Cell("ranges", "cora", "gcn", (("range", 8),))) == (8.0, "family, x2.00 for its range and width")
    assert plan.cell_measured(params, config.Cell("measured", "cora", "gcn")) == (9.0, "cora/gcn/measured itself")


def test_a_family_run_only_on_a_gpu_is_costed_on_the_cpu_by_the_benchmarks_figure_times_its_epochs(tmp_path):
    """Cora's GAT ran on a GPU (500 epochs a seed at 2 ms); the CPU benchmark measured 100 ms per
    seed-epoch batched: 50 s a seed on the CPU, not CAD-Net's figure. A corrupt benchmark file,
    or none for the method, falls back to the borrowed figure."""
    eval_root = tmp_path / "eval"
    write_table(eval_root, "cora", "gat", [(500, 2.0, "cuda (NVIDIA H200)")] * 2)
    write_table(eval_root, "cora", "cadnet", [(100, 10.0, "cpu")])
    bench = tmp_path / "bench" / "cpu" / "cora.json"
    bench.parent.mkdir(parents=True)
    bench.write_text('{"methods": {"figures": [{"method": "gat", "batched": 100.0, "single": 80.0}, '
                     '{"method": "agnn", "batched": null, "single": 40.0}]}}')
    seconds, source = plan.measured_per_seed("cora", "gat", eval_root)
    assert seconds == pytest.approx(50.0) and "the benchmark's 100.0 ms per seed-epoch on cpu" in source
    assert plan.measured_per_seed("cora", "gat", eval_root, device="cuda")[0] == pytest.approx(1.0)  # its own there
    write_table(eval_root, "cora", "agnn", [(300, 3.0, "cuda (NVIDIA H200)")])
    assert plan.measured_per_seed("cora", "agnn", eval_root)[0] == pytest.approx(12.0)  # no batched figure: one seed's
    bench.write_text('{"methods": ')
    assert plan.measured_per_seed("cora", "gat", eval_root)[1].startswith("cora/cadnet")
