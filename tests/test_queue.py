"""The queue for a lent machine (pipeline/queue.py): its order, a run on a small study end to end
on the CPU (train, resume, pack, adopt), the deadline, and bad options."""
from __future__ import annotations

import subprocess
import sys
import tarfile

import pytest

from conftest import NO_VARIANTS, PROJECT_ROOT, read_params, train_cell, update_params, write_params
from pipeline import config, queue
from pipeline.engine import plan, spec
from pipeline.files import save_torch
from test_adacad_batched import synthetic_graph


def test_the_queue_orders_tables_then_cadnets_rows_then_the_claims_rivals_then_the_rest_cheapest_first(workdir, monkeypatch):
    """The shipped params.yaml's plan: tiers in order, each cheapest first, unmeasured cells last
    in their tier; every cell short of the target is in it once."""
    cost = {"cadnet": 5.0, "appnp": 2.0, "gcn": 1.0, "gat": 40.0, "graph_unet": 300.0, "mixhop": 20.0}
    monkeypatch.setattr(plan, "measured_per_seed", lambda dataset, method, **k: (cost[method], "x") if method in cost else None)
    params = config.load_params()
    jobs = queue.plan_jobs(params, 100, "cpu")
    assert [j.tier for j in jobs] == sorted(j.tier for j in jobs)
    for tier in range(4):
        costs = [j.seconds for j in jobs if j.tier == tier]
        known = [c for c in costs if c is not None]
        assert known == sorted(known) and costs == known + [None] * (len(costs) - len(known))
    assert {j.tier for j in jobs} == {0, 1, 2, 3}
    assert all(j.tier == 1 for j in jobs if j.cell.method == "cadnet" and j.cell.study not in config.TABLE_STUDIES)
    assert all(j.tier == 2 for j in jobs if j.cell.method in queue.CLAIM_RIVALS and j.cell.study not in config.TABLE_STUDIES)
    # a network is short where none of its cells has the seeds (PubMed's GAT at range 2 is Table 2's
    # GAT, at 100 seeds), and planned once
    network = {cell: spec.experiment(params, cell) for cell in config.cells(params)}
    most: dict[str, int] = {}
    for cell, name in network.items():
        most[name] = max(most.get(name, 0), config.runs_for(params, cell))
    assert sorted(network[j.cell] for j in jobs) == sorted(name for name, runs in most.items() if runs < 100)
    assert all(j.to_go == 100 - most[network[j.cell]] for j in jobs)
    assert "pubmed/gat/ranges-range=2" not in {str(j.cell) for j in jobs}


def _small_study(workdir):
    """Synthetic Cora: Table 2's CAD-Net cell trained (2 seeds), a beta study of two cells not run."""
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=2, epochs=3, variants=NO_VARIANTS,
                  baselines=NO_VARIANTS)
    params = read_params(workdir)
    params["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 0, "grid": {"beta": [0.2, 0.9]}}
    write_params(workdir, params)
    (workdir / "data/processed/cora").mkdir(parents=True)
    save_torch(synthetic_graph(), workdir / "data/processed/cora/graph.pt")
    train_cell(["cora", "cadnet"])
    return params


def test_the_queue_trains_the_short_cells_seeds_and_the_stage_then_adopts_them(workdir, capsys):
    """--runs 2 on the small study: the two beta cells' seeds, trained as one replica batch; no
    table written; packed into one tar; a second queue has nothing to do; with the study's runs
    raised to 2, the train stage trains none of them."""
    params = _small_study(workdir)
    tables = {p: p.read_bytes() for p in (workdir / "reports/eval").rglob("*") if p.is_file()}
    capsys.readouterr()
    queue.main(["--runs", "2", "--pack", "out/seeds.tar"])
    err = capsys.readouterr().err
    assert "queue on cpu: 2 cells short of 2 seeds" in err
    assert "train cora/cadnet/2 cells as one batch (beta-beta=0.2 .. beta-beta=0.9): 4 seeds, 0 reused, 4 to train" in err
    names = [f"data/runs/cora/cadnet/beta-beta={b}/seed_00{s}.pt" for b in (0.2, 0.9) for s in (0, 1)]
    assert all((workdir / name).exists() for name in names)
    assert {p: p.read_bytes() for p in (workdir / "reports/eval").rglob("*") if p.is_file()} == tables
    with tarfile.open(workdir / "out/seeds.tar") as tar:
        assert sorted(tar.getnames()) == names

    queue.main(["--runs", "2"])
    assert "queue on cpu: 0 cells short of 2 seeds" in capsys.readouterr().err

    params["studies"]["beta"]["runs"] = 2
    write_params(workdir, params)
    train_cell(["cora", "cadnet"])
    err = capsys.readouterr().err
    assert "train cora/cadnet/2 cells as one batch (beta-beta=0.2 .. beta-beta=0.9): 4 seeds, 4 reused, 0 to train" in err
    assert (workdir / "reports/eval/cora/cadnet/beta-beta=0.9.csv").exists()


def test_a_dry_run_trains_nothing_and_a_passed_deadline_starts_nothing(workdir, capsys):
    _small_study(workdir)
    capsys.readouterr()
    queue.main(["--runs", "2", "--dry-run"])
    err = capsys.readouterr().err
    assert "CAD-Net's study rows: cora/cadnet/beta-beta=0.2: 0 -> 2 seeds, ~" in err
    assert not list((workdir / "data/runs/cora/cadnet").glob("beta-*/seed_*.pt"))
    queue.main(["--runs", "2", "--deadline", "0.001s"])  # less than any cell's estimate
    assert "queue: deadline reached; run the queue again to go on" in capsys.readouterr().err
    assert not list((workdir / "data/runs/cora/cadnet").glob("beta-*/seed_*.pt"))


def test_the_train_loop_keeps_the_deadline_with_the_queues_scaled_estimate(workdir, capsys, monkeypatch):
    """A hidden width 4 times Table 2's costs twice its family's figure in the queue's plan and in
    the train loop that keeps the deadline: 2 seeds at 200 s do not fit in 5 minutes (at the
    family's 100 s they would), so none starts."""
    params = _small_study(workdir)
    params["studies"]["hidden_units"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 0,
                                         "grid": {"hidden": [4 * params["hparams"]["cora"]["hidden"]]}}
    write_params(workdir, params)
    monkeypatch.setattr(plan, "measured_per_seed", lambda dataset, method, **k: (100.0, "family"))
    monkeypatch.setattr(plan, "cell_per_seed", lambda *a, **k: None)
    capsys.readouterr()
    queue.main(["--runs", "2", "--deadline", "5m", "--only", "cora/cadnet/hidden_units-*"])
    err = capsys.readouterr().err
    assert "0 -> 2 seeds, ~6.7 min" in err
    assert "(at the committed run's 200.0 s per seed of family, x2.00 for its range and width)" in err
    assert "(stopped at the deadline)" in err
    assert not list((workdir / "data/runs/cora/cadnet").glob("hidden_units-*/seed_*.pt"))


def test_worker_processes_keep_the_deadline_with_a_chunks_whole_time(workdir, capsys, monkeypatch):
    """chunk_workers 2 and one-seed chunks: a chunk of one seed at 400 s does not fit in 5
    minutes, in a worker process as in the stage's, so none is handed to a worker (not half
    its time for two side by side: each worker takes the whole)."""
    params = _small_study(workdir)
    params.update(chunk_workers=2, seed_chunk=1)
    write_params(workdir, params)
    monkeypatch.setattr(plan, "measured_per_seed", lambda dataset, method, **k: (400.0, "family"))
    monkeypatch.setattr(plan, "cell_per_seed", lambda *a, **k: None)
    capsys.readouterr()
    queue.main(["--runs", "2", "--deadline", "5m"])
    err = capsys.readouterr().err
    assert "chunks of up to 1, 2 at a time" in err and "(stopped at the deadline)" in err
    assert not list((workdir / "data/runs/cora/cadnet").glob("beta-*/seed_*.pt"))


@pytest.mark.parametrize("rates, expected", [
    ([5, 10, 15], 60.0),  # three cells of two seeds, one batch: chunks of two, two at a time
    ([5], 120.0),  # one cell: one chunk of two, one worker
])
def test_the_plan_costs_cells_batched_as_replicas_by_their_batchs_chunks(workdir, monkeypatch, rates, expected):
    """As the check stage's plan: CAD-Net's label-rate cells train as replicas of one batch, whose
    chunks run two at a time though each cell alone is one chunk; Table 2's cell, of another tier,
    trains in a batch of its own."""
    params = update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=1, variants=NO_VARIANTS,
                           baselines=NO_VARIANTS, device="cpu", chunk_workers=2, seed_chunk=2)
    params["studies"]["main"]["runs"] = {"default": 0}
    params["studies"]["label_rates"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": {"default": 0},
                                        "grid": {"train_per_class": rates}}
    write_params(workdir, params)
    monkeypatch.setattr(plan, "measured_per_seed", lambda *args, **kwargs: (60.0, "a figure"))
    jobs = {str(job.cell): job.seconds for job in queue.plan_jobs(config.load_params(), 2, "cpu")}
    assert jobs.pop("cora/cadnet/main") == 120.0
    assert jobs == {f"cora/cadnet/label_rates-train_per_class={rate}": expected for rate in rates}


def test_only_keeps_the_cells_its_patterns_match_in_the_queues_order(workdir):
    params = config.load_params()
    every = queue.plan_jobs(params, 100, "cpu")
    jobs = queue.plan_jobs(params, 100, "cpu", ["pubmed/cadnet/beta-*", "cora/gcn/ranges-range=1?"])
    names = [str(j.cell) for j in jobs]
    assert names == [str(j.cell) for j in every if str(j.cell) in names]  # the same order
    # β at PubMed's own value is Table 2's cell, at 100 seeds: not short
    betas = [b for b in params["studies"]["beta"]["grid"]["beta"] if b != config.hparams_for(params, "pubmed")["beta"]]
    assert sorted(names) == sorted([f"pubmed/cadnet/beta-beta={b}" for b in betas] + ["cora/gcn/ranges-range=10"])


@pytest.mark.parametrize("args, message", [(["--deadline", "soon"], "--deadline: 'soon' is not a duration"),
                                           (["--deadline", "0s", "--dry-run"], "--deadline: '0s'; allowed values: a duration above 0"),
                                           (["--runs", "0"], "--runs: 0; allowed values: an integer >= 1"),
                                           (["--only", "cora/gnc/*", "--dry-run"], "--only: 'cora/gnc/*' matches no cell")])
def test_a_bad_option_is_one_line_naming_it(workdir, args, message):
    run = subprocess.run([sys.executable, "-m", "pipeline.queue", *args], cwd=workdir, capture_output=True, text=True,
                         env={"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"})
    assert run.returncode != 0 and message in run.stderr and len(run.stderr.strip().splitlines()) <= 3
