"""The benchmark's synthetic graphs and its report (the timings themselves are not tested)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch_geometric.utils import is_undirected

from pipeline import bench


def test_synthetic_graph_has_the_datasets_sizes():
    hp = {"self_loops": False}
    graph = bench.synthetic_graph("photo", hp)
    nodes, edges, features, classes = 7650, 119081, 745, 8
    assert graph["y"].size(0) == nodes and graph["num_classes"] == classes
    assert graph["x"].shape == (nodes, features)
    assert graph["edge_index"].size(1) == 2 * edges
    assert is_undirected(graph["edge_index"], num_nodes=nodes)
    assert not (graph["edge_index"][0] == graph["edge_index"][1]).any()
    row_sums = torch.sparse.sum(graph["x"], dim=1).to_dense()
    assert torch.allclose(row_sums, torch.ones(nodes))
    assert torch.bincount(graph["y"], minlength=classes).min() >= 50  # the per-class split fits


ENGINES = {"dataset": "cora", "single_ms": 10.0, "batched_ms": 2.5, "appnp_ms": 5.0, "authors_ms": 30.0, "chunk": 25,
           "single_100_s": 100.0, "batched_100_s": 25.0, "appnp_100_s": 50.0, "authors_100_s": 300.0, "epochs": 100,
           "estimate_100_gb": 1.0, "estimate_chunk_gb": 0.25}
METHODS = [{"method": "cadnet", "implementation": "vmap", "single": 20.0, "batched": 4.0, "chunk": 25},
           {"method": "appnp", "single": 10.0, "batched": 2.0, "chunk": 25},
           {"method": "gcn", "single": 6.0, "batched": 1.0, "chunk": 25},
           {"method": "agnn", "implementation": "sparse", "single": 30.0, "batched": None, "chunk": None}]


RIVALS = [{"method": "gcn", "implementation": "sparse", "ours_25": 2.0, "plain_25": 3.0, "ours_1": 10.0, "plain_1": 12.0,
           "note": ""},
          {"method": "appnp", "implementation": "sparse", "ours_25": 8.0, "plain_25": 4.0, "ours_1": 10.0, "plain_1": 5.0,
           "note": ""},
          {"method": "gat", "implementation": "vmap", "ours_25": 8.0, "plain_25": None, "ours_1": 10.0, "plain_1": None,
           "note": ""},
          {"method": "graph_unet", "ours_25": None, "plain_25": None, "ours_1": 300.0, "plain_1": 240.0, "note": ""},
          {"method": "agnn", "implementation": "sparse", "ours_25": 3.0, "plain_25": None, "ours_1": 60.0, "plain_1": 72.0,
           "note": ""}]


def _record_all(root, device="cpu"):
    bench.record(device, "cora", "engines", ENGINES, 5, "test machine", root)
    bench.record(device, "cora", "memory", {"gib": 0.8}, 5, "test machine", root)
    bench.record(device, "cora", "methods", METHODS, 5, "test machine", root)
    bench.record(device, "cora", "profile", {"text": "profile table"}, 5, "test machine", root)
    bench.record(device, "cora", "rivals", RIVALS, 5, "test machine", root)


def _no_cells_left(monkeypatch):
    from pipeline import queue
    monkeypatch.setattr(queue, "plan_jobs", lambda params, runs, device: [])


def test_the_report_states_ratios_memory_and_each_figures_origin(tmp_path, monkeypatch):
    from pipeline import config

    _no_cells_left(monkeypatch)
    _record_all(tmp_path)
    text = bench.report("cpu", config.load_params(), tmp_path)
    assert "| cora | 10.00 | 2.50 | 5.00 | 30.00 | 0.250 | 0.500 | 12.0 | 25 |" in text  # d/b: 30 / 2.5
    assert "| cora | 25 | 0.25 GiB | 0.80 GiB | 1.00 GiB |" in text and "profile table" in text and "CPU" in text
    # one seed and batched, each over APPNP's in the same run, the batched speed-up (20 / 4); the
    # paper's over its APPNP (7.60 / 6.84)
    assert "| cadnet | vmap | 20.00 | 2.00 | 4.00 | 2.00 | 5.0x | 25 | 7.6 | 1.11 |" in text
    assert "| agnn | sparse | 30.00 | 3.00 | - | - | - | - | 7.8 | 1.14 |" in text
    assert "| gcn | - | 6.00 | " in text  # a figure recorded without its implementation
    assert "| cora | memory | " in text and "| test machine | 5 |" in text


def test_the_goals_are_met_or_not_by_the_recorded_figures(tmp_path, monkeypatch):
    from pipeline import config

    _no_cells_left(monkeypatch)
    _record_all(tmp_path)
    text = bench.report("cpu", config.load_params(), tmp_path)
    assert "| CAD-Net on Cora, batched, per seed against the authors' setup (d/b) | 12.0x | ≥ 30x | no |" in text
    goal = "on cora, 25 seeds, a plain version's ms per seed-epoch over ours"
    assert f"| gcn {goal} | 1.50x | ≥ 1x | yes |" in text  # 3 / 2
    assert f"| appnp {goal} | 0.50x | ≥ 1x | no |" in text
    assert f"| gat {goal} | no plain version in the bench | ≥ 1x | - |" in text
    # trained seed by seed: its goal is one seed against PyG's example (240 / 300)
    assert "| graph_unet on cora, one seed, PyG's example's ms per epoch over ours | 0.80x | ≥ 1x | no |" in text
    assert "| graph_unet | - | - | - | - | 300.00 | 240.00 | 0.80 |  |" in text
    assert "| gcn | sparse | 2.00 | 3.00 | 1.50 | 10.00 | 12.00 | 1.20 |  |" in text  # the rivals' table
    # AGNN batched (its sparse network): one seed against PyG's example, and its batch per
    # seed-epoch against the example's one seed at a time (72 / 3)
    assert "| agnn on cora, one seed, PyG's example's ms per epoch over ours | 1.20x | ≥ 1x | yes |" in text
    assert ("| agnn on cora, 25 seeds batched, PyG's example's ms per epoch (one seed at a time) over our ms per "
            "seed-epoch | 24.00x | ≥ 1x | yes |") in text
    assert "| what is left of the paper on cora, 20 seeds a cell | 0 s | ≤ 10.0 h of this CPU | yes |" in text
    bench.record("cuda", "cora", "engines", dict(ENGINES, authors_ms=300.0), 5, "gpu", tmp_path)
    bench.record("cuda", "cora", "methods", METHODS, 5, "gpu", tmp_path)
    cuda = bench.report("cuda", config.load_params(), tmp_path)
    assert "| CAD-Net on Cora, batched, per seed against the authors' setup (d/b) | 120.0x | ≥ 100x | yes |" in cuda
    assert "not measured" not in text
    assert "| what is left of the paper on cora, 100 seeds a cell | 0 s | ≤ 45.0 min on one H200 | yes |" in cuda


def test_a_section_measured_again_replaces_its_figures_and_keeps_the_others(tmp_path):
    _record_all(tmp_path)
    bench.record("cpu", "cora", "memory", {"gib": 0.5}, 3, "another machine", tmp_path)
    bench.record("cpu", "citeseer", "memory", {"gib": 0.7}, 3, "another machine", tmp_path)
    figures = bench.read_figures("cpu", tmp_path)
    assert figures["cora"]["memory"]["figures"] == {"gib": 0.5} and figures["cora"]["memory"]["epochs"] == 3
    assert figures["cora"]["engines"]["figures"] == ENGINES and figures["citeseer"]["memory"]["figures"] == {"gib": 0.7}
    assert figures["cora"]["memory"]["commit"] == bench.code_version() and bench.read_figures("cuda", tmp_path) == {}


def test_a_rival_measured_again_replaces_its_row_and_the_others_keep_their_stamp(tmp_path, monkeypatch):
    from pipeline import config

    _no_cells_left(monkeypatch)
    _record_all(tmp_path)
    monkeypatch.setattr(bench.time, "strftime", lambda fmt: "2030-01-02")
    unet = {"method": "graph_unet", "ours_25": None, "plain_25": None, "ours_1": 200.0, "plain_1": 240.0, "note": ""}
    bench.record("cpu", "cora", "rivals", [unet], 7, "another machine", tmp_path)
    rows = bench.read_figures("cpu", tmp_path)["cora"]["rivals"]["figures"]
    assert [r["method"] for r in rows] == [r["method"] for r in RIVALS]  # replaced in place
    assert rows[3] == unet and rows[0]["ours_25"] == 2.0 and rows[0]["measured"]["machine"] == "test machine"
    text = bench.report("cpu", config.load_params(), tmp_path)
    assert "| graph_unet on cora, one seed, PyG's example's ms per epoch over ours | 1.20x | ≥ 1x | yes |" in text
    assert "| cora | rivals: graph_unet | 2030-01-02 | " in text and "| another machine | 7 |" in text
    assert "| cora | rivals: gcn, appnp, gat, agnn | " in text
    bench.record("cpu", "cora", "rivals", [dict(unet, ours_1=100.0)], 7, "another machine", tmp_path)
    rows = bench.read_figures("cpu", tmp_path)["cora"]["rivals"]["figures"]
    assert rows[0]["measured"]["machine"] == "test machine"  # a kept row keeps its first stamp
    bench.record("cpu", "cora", "rivals", [dict(r) for r in RIVALS], 5, "test machine", tmp_path)
    text = bench.report("cpu", config.load_params(), tmp_path)
    assert "| cora | rivals | " in text  # all measured in one run: one line


def test_a_corrupt_figures_file_is_named(tmp_path):
    import pytest

    _record_all(tmp_path)
    (tmp_path / "cpu" / "cora.json").write_text('{"engines": ')  # cut short
    with pytest.raises(bench.DataError, match=r"cpu/cora\.json"):
        bench.read_figures("cpu", tmp_path)
    with pytest.raises(bench.DataError, match=r"cpu/cora\.json"):
        bench.record("cpu", "cora", "memory", {"gib": 0.5}, 3, "m", tmp_path)


def test_report_only_rewrites_the_page_from_the_recorded_figures(tmp_path, monkeypatch):
    _no_cells_left(monkeypatch)
    _record_all(tmp_path / "bench")
    monkeypatch.setattr(bench, "BENCH_ROOT", tmp_path / "bench")
    monkeypatch.setattr(bench, "BENCH_REPORT", tmp_path / "bench_{device}.md")
    monkeypatch.setattr(bench, "measure", lambda *a: pytest_fail("--report-only measured"))
    bench.main(["--report-only"])
    assert "| cora | 10.00 | 2.50 |" in (tmp_path / "bench_cpu.md").read_text()


def pytest_fail(message):
    raise AssertionError(message)


def test_a_dataset_with_a_processed_graph_is_benchmarked_on_it(tmp_path, monkeypatch):
    from pipeline.files import save_torch

    monkeypatch.setattr(bench, "PROCESSED_ROOT", tmp_path)
    assert not bench.has_real_graph("photo")
    real = {"x": torch.eye(3).to_sparse_coo(), "y": torch.arange(3)}
    save_torch(real, tmp_path / "photo" / "graph.pt")
    monkeypatch.setattr(bench, "load_graph", lambda d: torch.load(tmp_path / d / "graph.pt"))
    assert bench.has_real_graph("photo") and torch.equal(bench.bench_graph("photo", {})["y"], real["y"])


def test_a_methods_only_report_has_no_engines_table(tmp_path, monkeypatch):
    from pipeline import config

    _no_cells_left(monkeypatch)
    rows = [{"method": "appnp", "single": 10.0, "batched": 2.0, "chunk": 25},
            {"method": "gcn", "single": 5.0, "batched": 1.0, "chunk": 25}]
    bench.record("cpu", "photo", "methods", rows, 5, "m", tmp_path)
    text = bench.report("cpu", config.load_params(), tmp_path)
    assert "(a) single ms" not in text and "Profile" not in text
    assert "| gcn | - | 5.00 | 0.50 | 1.00 | 0.50 | 5.0x | 25 |" in text
    assert "| CAD-Net on Cora, batched, per seed against the authors' setup (d/b) | not measured |" in text


def test_an_unknown_method_to_time_is_named(capsys):
    import pytest

    from pipeline import config

    with pytest.raises(config.ConfigError, match="gcnn"):
        bench.main(["--datasets", "--methods-on", "cora", "--methods", "appnp", "gcnn"])


def test_methods_are_timed_as_asked(monkeypatch):
    from test_adacad_batched import synthetic_graph

    from pipeline import config

    monkeypatch.setattr(bench, "bench_graph", lambda dataset, hp: synthetic_graph())
    monkeypatch.setattr(bench, "has_real_graph", lambda dataset: True)
    params = config.load_params()
    rows = bench.measure_methods("cora", params, 1, torch.device("cpu"), ["gcn", "graph_unet"])
    assert [r["method"] for r in rows] == ["gcn", "graph_unet"]
    assert rows[0]["batched"] > 0 and rows[1]["batched"] is None  # Graph U-Net runs seed by seed
    assert [r["implementation"] for r in rows] == [config.hparams_for(params, "cora", m).get("implementation", "vmap")
                                                   for m in ("gcn", "graph_unet")]


def test_sparse_times_the_methods_section_on_the_sparse_networks_too(tmp_path, monkeypatch):
    """`--sparse` reaches every section that times the baselines, not the rivals' alone (the
    methods section once ran Physics's GraphSAGE on the `vmap` network, out of memory)."""
    from pipeline import config

    assert config.hparams_for(config.load_params(), "computers", "gat").get("implementation", "vmap") == "vmap"
    timed = {}
    monkeypatch.setattr(bench, "BENCH_ROOT", tmp_path)
    monkeypatch.setattr(bench, "report_file", lambda device: tmp_path / "bench.md")
    monkeypatch.setattr(bench, "measure_methods", lambda dataset, params, *a: timed.setdefault("methods", params) and [])
    monkeypatch.setattr(bench, "measure_rivals", lambda dataset, params, *a: timed.setdefault("rivals", params) and [])
    monkeypatch.setattr(bench, "time_replicas", lambda *a: (1.0, 1.0))
    monkeypatch.setattr(bench, "chunk_size", lambda *a: 2)
    monkeypatch.setattr(bench, "bench_graph", lambda dataset, hp: None)
    _no_cells_left(monkeypatch)
    bench.main(["--datasets", "--methods-on", "computers", "--rivals-on", "computers", "--methods", "gat", "--sparse"])
    for section in ("methods", "rivals"):
        assert config.hparams_for(timed[section], "computers", "gat")["implementation"] == "sparse", section


def test_cadnet_is_timed_beside_its_plain_version_and_a_variant_is_not(monkeypatch):
    """CAD-Net's plain version is the yardstick of its speed; a Table 3 variant has none."""
    from test_adacad_batched import synthetic_graph

    from pipeline import config

    monkeypatch.setattr(bench, "bench_graph", lambda dataset, hp: synthetic_graph())
    monkeypatch.setattr(bench, "has_real_graph", lambda dataset: True)
    monkeypatch.setattr(bench, "RIVAL_SEEDS", 2)
    rows = bench.measure_rivals("cora", config.load_params(), 1, torch.device("cpu"), ["cadnet", "rw"])
    assert [r["method"] for r in rows] == ["cadnet"]
    assert all(rows[0][f"{who}_{seeds}"] > 0 for who in ("ours", "plain") for seeds in (2, 1))
    lines = bench.goals_table("cpu", {}, {}, {"cora": rows}, {})
    assert any(line.startswith("| cadnet on cora, 2 seeds, a plain version's ms per seed-epoch over ours |")
               for line in lines)


def _answer(value):
    return value


def _raise(message):
    raise ValueError(message)


def _refuse_memory():
    raise MemoryError("cannot allocate 24 GB")


def _kill_self():
    import os
    import signal
    os.kill(os.getpid(), signal.SIGKILL)  # what the kernel does to a process out of memory


def _sleep(seconds):
    import time
    time.sleep(seconds)


def test_isolated_returns_a_result_or_says_why_not():
    assert bench.isolated(_answer, (41,), timeout_s=600) == (41, None)
    assert bench.isolated(_raise, ("bad value",), timeout_s=600) == (None, "ValueError: bad value")
    assert bench.isolated(_kill_self, (), timeout_s=600) == (None, "killed (out of memory)")
    assert bench.isolated(_refuse_memory, (), timeout_s=600) == (None, "out of memory, MemoryError: cannot allocate 24 GB")
    assert bench.isolated(_sleep, (60,), timeout_s=3) == (None, "stopped after 3 s")


def _sleep_and_say_who(path):
    import os
    import time
    Path(path).write_text(str(os.getpid()))
    time.sleep(900)


def test_a_stopped_bench_leaves_no_measuring_process_behind(tmp_path):
    """Killing the bench (SIGTERM, as `kill` and a job scheduler send it) also ends the process
    isolated() measures in (main() calls exit_on_sigterm first)."""
    said = tmp_path / "child.pid"
    script = ("from pipeline import bench; from test_bench import _sleep_and_say_who; bench.exit_on_sigterm(); "
              f"bench.isolated(_sleep_and_say_who, ({str(said)!r},), timeout_s=900)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])]))
    parent = subprocess.Popen([sys.executable, "-c", script], env=env)
    while not said.exists() or not said.read_text():  # however slow the machine, while the bench runs
        assert parent.poll() is None, "the measuring child never started"
        time.sleep(0.1)
    child = int(said.read_text())
    parent.send_signal(signal.SIGTERM)
    parent.wait()
    deadline = time.monotonic() + 300  # well inside the child's 900 s sleep: only a stalled machine reaches it
    while _alive(child):
        assert time.monotonic() < deadline, f"the measuring process {child} outlived the bench"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_chunk_killed_for_memory_is_tried_at_half_its_size(monkeypatch):
    from pipeline import config

    params = config.load_params()
    tried = []

    def fake_isolated(function, args, timeout_s):
        seeds = args[5] if len(args) > 5 else None
        tried.append(seeds)
        if seeds is None:
            return 10.0, None
        if seeds > 12:
            return None, "killed (out of memory)"
        return (2.0, None) if seeds <= 6 else (None, "out of memory, RuntimeError: can't allocate")

    monkeypatch.setattr(bench, "isolated", fake_isolated)
    monkeypatch.setattr(bench, "chunk_size", lambda graph, hp, params, runs: 25)
    monkeypatch.setattr(bench, "bench_graph", lambda dataset, hp: {})
    rows = bench.measure_methods("cora", params, 1, torch.device("cpu"), ["gcn", "graph_unet"], timeout_s=60)
    assert tried == [None, 25, 12, 6, None]  # graph_unet runs seed by seed: no chunk
    assert rows[0] == {"method": "gcn", "implementation": "sparse", "single": 10.0, "batched": 2.0, "chunk": 6,
                       "note": "chunk of 25: killed (out of memory); chunk of 12: out of memory, RuntimeError: can't allocate"}
    assert rows[1]["chunk"] is None and rows[1]["batched"] is None
    table = "\n".join(bench.methods_table("cora", rows))
    assert "| gcn | sparse | 10.00 | - | 2.00 | - | 5.0x | 6 |" in table and "chunk of 12: out of memory" in table


def test_the_beta_studys_cells_are_timed_as_replicas_of_one_batch(monkeypatch):
    from test_adacad_batched import synthetic_graph

    from pipeline import config

    monkeypatch.setattr(bench, "bench_graph", lambda dataset, hp: synthetic_graph())
    monkeypatch.setattr(bench, "has_real_graph", lambda dataset: True)
    batched = []
    real = bench.train_replicas
    monkeypatch.setattr(bench, "train_replicas", lambda g, replicas, *a, **k: batched.append(replicas) or real(g, replicas, *a, **k))
    mixed, alone = bench.time_replicas("cora", config.load_params(), 1, torch.device("cpu"), 25)
    assert mixed > 0 and alone > 0
    timed = batched[-1]
    assert len(timed) == 25 and len({r.hp["beta"] for r in timed}) == 21 and [r.seed for r in timed[:22]] == [0] * 21 + [1]


def test_a_rows_label_names_the_network_its_method_trains():
    """A baseline's label is its `implementation` setting (its schema's default where params.yaml
    leaves it out; MixHop's only network is `vmap`); CAD-Net's batched engine is not `vmap`."""
    from pipeline import config

    params = config.load_params()
    params["method_hparams"]["gat"]["cora"] = {"implementation": "sparse"}
    assert bench.implementation(params, "cora", "gat") == "sparse"
    assert bench.implementation(params, "cora", "graph_unet") == "vmap"  # the schema's default
    assert bench.implementation(params, "cora", "cadnet") == "-"
    assert bench.implementation(params, "cora", "rw") == "-"
    assert bench.implementation(params, "cora", "mixhop") == "vmap"  # its only network


def test_what_is_left_is_each_short_cells_seeds_to_go_times_its_methods_figure(monkeypatch):
    """Two short cells at hand-set figures: 98 seeds x 2 ms x 50 epochs and 100 x 10 ms x 200
    epochs (Graph U-Net trains one seed at a time: its one-seed figure). GCN trains batched and
    has only a one-seed figure, its reference network's: counted as without a figure, as is a
    method not measured."""
    from pipeline import config, queue

    jobs = [queue.Job(config.Cell("beta", "cora", "cadnet", (("beta", 0.5),)), 1, 2, 98, None),
            queue.Job(config.Cell("label_rates", "cora", "graph_unet", (("train_per_class", 5),)), 2, 0, 100, None),
            queue.Job(config.Cell("label_rates", "cora", "gcn", (("train_per_class", 5),)), 2, 0, 100, None),
            queue.Job(config.Cell("label_rates", "cora", "gat", (("train_per_class", 5),)), 2, 0, 100, None)]
    monkeypatch.setattr(queue, "plan_jobs", lambda params, runs, device: jobs)
    monkeypatch.setattr(bench.plan, "epochs_per_seed", lambda dataset, method, *where: {"cadnet": 50.0}.get(method))
    params = config.load_params()
    params["method_hparams"]["graph_unet"]["epochs"] = 200
    params["method_hparams"]["graph_unet"].pop("cora", None)
    assert config.hparams_for(params, "cora", "graph_unet")["epochs"] == 200
    measured = {"cora": [{"method": "cadnet", "single": 9.0, "batched": 2.0},
                         {"method": "graph_unet", "single": 10.0, "batched": None},
                         {"method": "gcn", "single": 10.0, "batched": None}]}
    studies = bench.remaining_seconds(params, measured, "cpu")
    text = "\n".join(bench.remaining_lines(studies, ["cora"], 100))
    assert "| beta | 1 | 98 | 10 s | 0 |" in text  # 98 x 2 ms x 50 = 9.8 s
    assert "| label_rates | 3 | 300 | 3.3 min | 2 |" in text  # 100 x 10 ms x 200; GCN and GAT without
    assert "| all | 4 | 398 | 3.5 min | 2 |" in text
    goals = "\n".join(bench.goals_table("cuda", {}, measured, {}, {100: studies}))
    assert "| what is left of the paper on cora, 100 seeds a cell | 3.5 min (+2 cells without a figure) | ≤ 45.0 min on one H200 | no |" in goals


def test_sparse_selects_each_baselines_sparse_network_where_it_has_one():
    from pipeline import config

    params = config.load_params()
    timed = bench.with_sparse(params, ["computers"])
    assert config.hparams_for(timed, "computers", "gat")["implementation"] == "sparse"
    assert config.hparams_for(timed, "computers", "agnn")["implementation"] == "sparse"
    assert "implementation" not in config.hparams_for(timed, "computers", "mixhop")  # it has none
    assert config.hparams_for(params, "computers", "gat").get("implementation", "vmap") == "vmap"  # params untouched
