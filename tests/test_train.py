"""The train stage (pipeline/train.py): resuming, reusing and setting aside seeds, fixed blocks,
a family's cells, and failing without loss."""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import PROJECT_ROOT, read_params, train_cell, update_params, vmapped, write_params
from pipeline import check, config, preprocess, train
from pipeline.engine import cells, device, dispatch, loop, spec, store
from pipeline.files import save_torch
from pipeline.paths import FEATURES_AS_READ
from test_adacad_batched import FEATURES, synthetic_graph


# ------------------------------------------------------------------------ resuming


def _cora_workdir(workdir, method="cadnet", **params):
    """A synthetic Cora with ``method`` (CAD-Net or a baseline) as the only study; its seeds' folder."""
    update_params(workdir, datasets=["cora"], methods=[method], variants={"datasets": [], "methods": [], "runs": {}}, baselines={"datasets": [], "methods": [], "runs": {}},
                  **params)
    graph_dir = workdir / "data/processed/cora"
    graph_dir.mkdir(parents=True, exist_ok=True)
    save_torch(synthetic_graph(), graph_dir / "graph.pt")
    return workdir / f"data/runs/cora/{method}/main"


def _forget_tables(workdir, method="cadnet"):
    """As if the last run had stopped before writing the cell's tables: train judges the cell
    by its seeds again (a cell whose tables were written under its spec is kept as it is)."""
    shutil.rmtree(workdir / f"reports/eval/cora/{method}")


def _records(run_dir):
    return {p.name: torch.load(p, weights_only=False) for p in sorted(run_dir.glob("seed_*.pt"))}


def test_a_seed_does_not_depend_on_its_chunk_and_a_resume_retrains_only_the_lost_seed(workdir):
    """runs = 60 in chunks of 20, dropout on everywhere: a lost seed is retrained on its own and
    comes out identical (its dropout masks come from its own stream); no other file is rewritten."""
    run_dir = _cora_workdir(workdir, runs=60, seed_chunk=25, epochs=3, p_drop=0.3)
    train_cell(["cora", "cadnet"])
    records = _records(run_dir)
    assert len(records) == 60 and {r["engine"] for r in records.values()} == {"batched (chunk of 20)"}
    mtimes = {p.name: p.stat().st_mtime_ns for p in run_dir.glob("seed_*.pt")}
    lost = run_dir / "seed_037.pt"
    lost.unlink()
    _forget_tables(workdir)

    train_cell(["cora", "cadnet"])
    again = torch.load(lost, weights_only=False)
    assert again["engine"] == "batched (chunk of 1)"
    for key, values in records["seed_037.pt"]["history"].items():
        assert again["history"][key] == pytest.approx(values, rel=1e-5, abs=1e-6), key
    assert again["selected_epoch"] == records["seed_037.pt"]["selected_epoch"]
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.glob("seed_*.pt") if p != lost} == \
        {k: v for k, v in mtimes.items() if k != "seed_037.pt"}


def test_fewer_runs_reuse_the_first_seeds_and_going_back_trains_nothing(workdir, monkeypatch):
    """The README's quick look (-S runs=10) after a 30-seed run, then back to 30: the first
    10 seeds are reused, the other 20 wait in the stash and come back; nothing is retrained."""
    run_dir = _cora_workdir(workdir, runs=30, epochs=3)
    train_cell(["cora", "cadnet"])
    before = _records(run_dir)
    trained = []
    real = dispatch.train_replicas
    monkeypatch.setattr(dispatch, "train_replicas", lambda g, replicas, *a, **k: trained.append(replicas) or real(g, replicas, *a, **k))
    update_params(workdir, runs=10)
    train_cell(["cora", "cadnet"])
    assert sorted(_records(run_dir)) == sorted(list(before)[:10])
    update_params(workdir, runs=30)
    train_cell(["cora", "cadnet"])
    assert trained == []
    assert {k: r["test_acc"] for k, r in _records(run_dir).items()} == {k: r["test_acc"] for k, r in before.items()}


@pytest.mark.parametrize("bad", [dict(hidden=10**12), dict(memory_budget_gb=1e-6), dict(train_per_class=10**6, split="per_class")])
def test_a_value_that_fails_late_loses_no_finished_seed(workdir, bad):
    """Settings that pass validation but cannot train (a huge layer, a budget below one seed,
    a split larger than a class) stop with one line before any seed file is touched; the
    old value back, every seed is reused."""
    run_dir = _cora_workdir(workdir, runs=4, epochs=3)
    train_cell(["cora", "cadnet"])
    before = {p.name: p.stat().st_mtime_ns for p in run_dir.glob("seed_*.pt")}
    update_params(workdir, **bad)
    _forget_tables(workdir)  # a memory budget is not in CAD-Net's spec: its tables would stand
    with pytest.raises(config.PipelineError):
        train_cell(["cora", "cadnet"])
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.glob("seed_*.pt")} == before


def test_other_settings_move_seeds_to_the_stash_and_back(workdir):
    run_dir = _cora_workdir(workdir, runs=3, epochs=3)
    train_cell(["cora", "cadnet"])
    before = _records(run_dir)
    update_params(workdir, epochs=4)
    train_cell(["cora", "cadnet"])
    stashed = list((workdir / "data/stash/cora/cadnet").rglob("seed_*.pt"))
    assert len(stashed) == 3 and _records(run_dir)["seed_000.pt"]["fingerprint"] != before["seed_000.pt"]["fingerprint"]
    update_params(workdir, epochs=3)
    train_cell(["cora", "cadnet"])
    assert {k: r["fingerprint"] for k, r in _records(run_dir).items()} == {k: r["fingerprint"] for k, r in before.items()}


def test_a_copied_seed_file_is_not_counted_as_another_seed(workdir):
    run_dir = _cora_workdir(workdir, runs=3, epochs=3)
    train_cell(["cora", "cadnet"])
    shutil.copy(run_dir / "seed_001.pt", run_dir / "seed_002.pt")
    _forget_tables(workdir)
    train_cell(["cora", "cadnet"])  # seed 2 is retrained: the copy holds seed 1
    assert torch.load(run_dir / "seed_002.pt", weights_only=False)["seed"] == 2


def test_a_diverging_loss_stops_with_one_line_naming_seed_and_epoch(workdir):
    _cora_workdir(workdir, runs=2, epochs=3)
    graph = synthetic_graph()
    graph["x"] = torch.sparse_coo_tensor(graph["x"].indices(), torch.full_like(graph["x"].values(), float("nan")),
                                         graph["x"].shape).coalesce()
    save_torch(graph, workdir / "data/processed/cora/graph.pt")
    with pytest.raises(loop.TrainingError, match=r"cora/cadnet/main: seed 0: training loss is nan at epoch 1"):
        train_cell(["cora", "cadnet"])


def test_running_out_of_memory_is_one_line(workdir, monkeypatch):
    _cora_workdir(workdir, runs=2, epochs=3)

    def no_memory(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: not enough memory: you tried "
                           "to allocate 4000000000000 bytes.\nmore detail")
    monkeypatch.setattr(dispatch, "train_replicas", no_memory)
    with pytest.raises(loop.TrainingError, match=r"^cora/cadnet/main: out of memory on cpu with chunks of 2 seeds .*seed_chunk"):
        train_cell(["cora", "cadnet"])


@pytest.mark.parametrize("err, expected", [
    (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 4000000000000 bytes."), True),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: not enough memory: ..."), True),
    (MemoryError(), True),
    (torch.OutOfMemoryError("CUDA out of memory."), True),
    # an unrelated error that only mentions allocation stays itself, traceback and all
    (RuntimeError("Trying to resize storage that is not resizable (allocated by numpy)"), False),
    (ValueError("can't allocate memory"), False),
])
def test_only_the_allocators_refusals_count_as_out_of_memory(err, expected):
    assert device.is_out_of_memory(err) is expected


@pytest.mark.parametrize("method", ["cadnet", "gcn"])
def test_chunks_in_worker_processes_give_the_records_of_chunks_in_the_stage(workdir, monkeypatch, capsys, method):
    """chunk_workers 2: the cell's three chunks train in joblib's worker processes (the stage's
    own run_chunk is broken here, and workers do not see that), with the same records bit for
    bit as one chunk after another in the stage's process (GCN: its sparse network on Cora, as
    params.yaml selects it, whose seeds draw dropout from their own streams as CAD-Net's do)."""
    run_dir = _cora_workdir(workdir, method=method, runs=6, seed_chunk=2, epochs=3, p_drop=0.3, chunk_workers=1)
    train_cell(["cora", method])
    alone = _records(run_dir)
    assert len(alone) == 6
    shutil.rmtree(run_dir)
    _forget_tables(workdir, method)

    def broken(*args, **kwargs):
        raise AssertionError("a chunk ran in the stage's process")

    monkeypatch.setattr(dispatch, "run_chunk", broken)
    update_params(workdir, chunk_workers=2)
    train_cell(["cora", method])
    assert "2 at a time" in capsys.readouterr().err
    side_by_side = _records(run_dir)
    assert sorted(side_by_side) == sorted(alone)
    for name, record in alone.items():
        assert side_by_side[name]["history"] == record["history"], name
        assert side_by_side[name]["test_acc"] == record["test_acc"], name


# ------------------------------------------------------------------------ the registry's switches


def test_method_without_batched_form_runs_seed_by_seed_through_the_same_loop(workdir, monkeypatch):
    """A registry entry with batched=False: the stage trains it one seed at a time (engine
    single) even where params.yaml asks for the batched engine, with the same records."""
    import dataclasses

    from pipeline.models import REGISTRY

    monkeypatch.setitem(REGISTRY, "cadnet", dataclasses.replace(REGISTRY["cadnet"], batched=False))
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=3, epochs=3, engine="batched", n_jobs=1,
                  variants={"datasets": [], "methods": [], "runs": {}}, baselines={"datasets": [], "methods": [], "runs": {}})
    (workdir / "data/processed/cora").mkdir(parents=True)
    save_torch(synthetic_graph(), workdir / "data/processed/cora/graph.pt")
    train_cell(["cora", "cadnet"])
    records = [torch.load(p, weights_only=False) for p in sorted((workdir / "data/runs/cora/cadnet/main").glob("seed_*.pt"))]
    assert [r["engine"] for r in records] == ["single"] * 3
    from pipeline import config

    hp = config.hparams_for(config.load_params(), "cora", "cadnet")
    reference = loop.train_seed(synthetic_graph(), hp, 2)  # the one-seed reference, seed 2's own dropout
    assert records[2]["history"] == reference["history"] and records[2]["test_acc"] == reference["test_acc"]


@pytest.mark.parametrize("batched, n_jobs, side_by_side", [(False, 2, 2), (True, 2, 1), (False, 1, 1)])
def test_the_printed_estimate_counts_the_seeds_trained_side_by_side(workdir, monkeypatch, batched, n_jobs, side_by_side):
    """The single engine on CPU trains n_jobs seeds at once; the stage's estimate divides by that, as check's plan does."""
    import dataclasses

    from pipeline.models import REGISTRY

    monkeypatch.setitem(REGISTRY, "cadnet", dataclasses.replace(REGISTRY["cadnet"], batched=batched))
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=3, epochs=3, n_jobs=n_jobs, device="cpu",
                  variants={"datasets": [], "methods": [], "runs": {}}, baselines={"datasets": [], "methods": [], "runs": {}})
    (workdir / "data/processed/cora").mkdir(parents=True)
    save_torch(synthetic_graph(), workdir / "data/processed/cora/graph.pt")
    asked = {}

    class Estimated(Exception):
        pass

    def estimate(*args, **kwargs):
        asked.update(kwargs)
        raise Estimated  # nothing to train past this point

    monkeypatch.setattr(train.plan, "estimate", estimate)
    with pytest.raises(Estimated):
        train_cell(["cora", "cadnet"])
    assert asked.get("side_by_side", 1) == side_by_side


@pytest.mark.parametrize("implementation", ["vmap", "sparse"])
def test_graph_unet_seeds_on_cpu_train_each_in_a_process_of_its_own_with_the_reference_results(workdir, monkeypatch,
                                                                                                implementation):
    """Two seeds, two fresh processes (a reused worker would keep what leaked), and the records
    of the one-seed reference in this process; with the features dense or sparse."""
    assert "graph_unet" in dispatch.FRESH_PROCESS_PER_SEED
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=2, n_jobs=1,
                  variants={"datasets": [], "methods": [], "runs": {}},
                  baselines={"datasets": ["cora"], "methods": ["graph_unet"], "runs": {}},
                  method_hparams={**config.load_params()["method_hparams"],
                                  "graph_unet": {"hidden": 8, "depth": 2, "edge_drop": 0.2, "p_drop": 0.5,
                                                 "lr": 0.01, "weight_decay": 1e-3, "epochs": 3,
                                                 "early_stop_window": 0, "implementation": implementation}})
    (workdir / "data/processed/cora").mkdir(parents=True)
    save_torch(synthetic_graph(), workdir / "data/processed/cora/graph.pt")
    started = []
    real = dispatch.subprocess.run
    monkeypatch.setattr(dispatch.subprocess, "run", lambda *a, **k: started.append(a) or real(*a, **k))
    train_cell(["cora", "graph_unet"])
    assert len(started) == 2
    hp = config.hparams_for(config.load_params(), "cora", "graph_unet")
    for seed in range(2):
        record = torch.load(workdir / f"data/runs/cora/graph_unet/baselines/seed_{seed:03d}.pt", weights_only=False)
        reference = loop.train_seed(synthetic_graph(), hp, seed, "cpu", "graph_unet")
        assert record["history"] == reference["history"] and record["test_acc"] == reference["test_acc"]


def test_a_corrupt_graph_file_is_one_line_naming_it_and_the_fix(workdir):
    run_dir = _cora_workdir(workdir, runs=2, epochs=3)
    train_cell(["cora", "cadnet"])
    before = {p.name: p.stat().st_mtime_ns for p in run_dir.glob("seed_*.pt")}
    graph_file = workdir / "data/processed/cora/graph.pt"
    graph_file.write_bytes(graph_file.read_bytes()[:200])  # truncated
    _forget_tables(workdir)
    with pytest.raises(config.DataError) as info:
        train_cell(["cora", "cadnet"])
    message = str(info.value)
    assert "\n" not in message and "data/processed/cora/graph.pt" in message
    assert "dvc repro --force preprocess@cora" in message
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.glob("seed_*.pt")} == before


def test_a_cell_set_to_zero_runs_trains_nothing_and_keeps_its_seeds_for_later(workdir):
    """`variants.runs.cora: {rw: 0}` leaves the cell unrun: its finished seeds wait in the
    stash and come back, untouched, when the runs come back."""
    _cora_workdir(workdir, runs=2, epochs=3)
    update_params(workdir, variants={"datasets": ["cora"], "methods": ["rw"], "runs": {}})
    run_dir = workdir / "data/runs/cora/rw/variants"
    train_cell(["cora", "rw"])
    before = _records(run_dir)
    update_params(workdir, variants={"datasets": ["cora"], "methods": ["rw"], "runs": {"cora": {"rw": 0}}})
    train_cell(["cora", "rw"])
    assert _records(run_dir) == {}
    update_params(workdir, variants={"datasets": ["cora"], "methods": ["rw"], "runs": {}})
    train_cell(["cora", "rw"])
    assert {k: r["test_acc"] for k, r in _records(run_dir).items()} == {k: r["test_acc"] for k, r in before.items()}


def test_seed_records_name_the_device_that_trained_them(workdir):
    run_dir = _cora_workdir(workdir, runs=1, epochs=2)
    train_cell(["cora", "cadnet"])
    assert _records(run_dir)["seed_000.pt"]["device"] == "cpu"


def test_a_cells_own_seed_chunk_is_not_in_its_identity_its_chunk_size_is(workdir):
    """CAD-Net's seeds do not depend on their chunk, so a new cap retrains none of them; a
    vmapped baseline's chunk size is part of its seeds' identity."""
    params = vmapped(config.load_params(), "gcn")
    own = params["method_hparams"]
    capped = {**params, "method_hparams": {**own, "cadnet": {"seed_chunk": 5}}}
    cadnet = config.Cell(config.table_cell_name(params, "cadnet"), "cora", "cadnet")
    assert spec.seed_identity(spec.cell_spec(capped, cadnet)) == spec.seed_identity(spec.cell_spec(params, cadnet))
    gcn = spec.cell_spec(params, config.Cell(config.table_cell_name(params, "gcn"), "cora", "gcn"))
    assert spec.seed_identity(gcn, 5) != spec.seed_identity(gcn, 25)


def test_a_baseline_whose_protocol_reads_the_features_as_read_trains_on_them(workdir):
    """`baselines.protocol.cora.normalize_features: false` (Shchur et al.'s protocol: the features as
    read): the GCN cell's seed is the one trained on preprocess's features_as_read.pt, not on
    graph.pt's row-normalised features; CAD-Net's cell on the same dataset keeps graph.pt's."""
    counts = synthetic_graph()["x"].to_dense()
    counts = (counts > 0).float() * torch.arange(1, FEATURES + 1).float()  # integer counts, rows summing well above 1
    graph = {**synthetic_graph(), "x": counts.to_sparse().coalesce()}
    normalised = {**graph, "x": preprocess.normalize_rows(graph["x"], "clamped_sum")}
    (workdir / "data/processed/cora").mkdir(parents=True)
    save_torch(normalised, workdir / "data/processed/cora/graph.pt")
    save_torch(graph["x"], workdir / "data/processed/cora" / FEATURES_AS_READ)
    own = config.load_params()["method_hparams"]
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=1, variants={"datasets": [], "methods": [], "runs": {}},
                  baselines={"datasets": ["cora"], "methods": ["gcn"], "runs": {}, "protocol": {"cora": {"normalize_features": False}}},
                  method_hparams={**own, "gcn": {**own["gcn"], "epochs": 4, "hidden": 4}})
    params = config.load_params()
    gcn, cadnet = config.hparams_for(params, "cora", "gcn"), config.hparams_for(params, "cora", "cadnet")
    assert gcn["normalize_features"] is False and cadnet["normalize_features"] == "clamped_sum"
    assert cells.features_rule(params, "cora", gcn) is False and cells.features_rule(params, "cora", cadnet) is None
    assert torch.equal(cells.load_cell_graph("cora", False)["x"].to_dense(), counts)

    train_cell(["cora", "gcn"])
    record = torch.load(workdir / "data/runs/cora/gcn/baselines/seed_000.pt", weights_only=False)
    as_read = loop.train_chunk(graph, gcn, [0], "cpu", "gcn")[0]
    as_written = loop.train_chunk(normalised, gcn, [0], "cpu", "gcn")[0]
    assert record["history"]["train_loss"] == pytest.approx(as_read["history"]["train_loss"], rel=1e-6)
    assert record["history"]["train_loss"] != pytest.approx(as_written["history"]["train_loss"], rel=1e-3)
    # the rule it normalises by is part of what the seed must match
    cell = config.Cell("baselines", "cora", "gcn")
    before = spec.cell_spec(config.load_params(), cell)
    update_params(workdir, baselines={"datasets": ["cora"], "methods": ["gcn"], "runs": {}, "protocol": {}})
    assert spec.seed_identity(spec.cell_spec(config.load_params(), cell), 1) != spec.seed_identity(before, 1)


# ------------------------------------------------------------------------ fixed blocks


def test_a_resumed_baseline_trains_the_fixed_blocks_of_its_lost_seeds_whole_and_writes_only_those(workdir, monkeypatch):
    """A baseline (vmapped, its dropout per fixed chunk of 2) that lost seeds 2 and 5 trains the
    blocks {2, 3} and {4, 5} whole, so that each lost seed comes back as the full run made it, and
    rewrites no other seed file."""
    run_dir = _cora_workdir(workdir, "gcn", runs=6, seed_chunk=2, epochs=3)
    write_params(workdir, vmapped(read_params(workdir), "gcn"))
    train_cell(["cora", "gcn"])
    full = _records(run_dir)
    (run_dir / "seed_002.pt").unlink()
    (run_dir / "seed_005.pt").unlink()
    mtimes = {p.name: p.stat().st_mtime_ns for p in run_dir.glob("seed_*.pt")}
    _forget_tables(workdir, "gcn")
    trained = []
    real = dispatch.train_replicas
    monkeypatch.setattr(dispatch, "train_replicas",
                        lambda g, replicas, *a, **k: trained.append([r.seed for r in replicas]) or real(g, replicas, *a, **k))
    train_cell(["cora", "gcn"])
    assert trained == [[2, 3], [4, 5]]
    again = _records(run_dir)
    assert sorted(again) == sorted(full)
    for name, record in full.items():
        assert again[name]["fingerprint"] == record["fingerprint"] and again[name]["history"] == record["history"], name
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.glob("seed_*.pt") if p.name in mtimes} == mtimes


def test_a_half_written_seed_file_is_removed_and_a_stale_one_stashed(workdir):
    """A write cut short (files.write_atomic's temporary file) is never a seed; a seed file of
    other settings waits in the stash under its identity."""
    run_dir = _cora_workdir(workdir, runs=2, seed_chunk=1, epochs=3)
    train_cell(["cora", "cadnet"])
    update_params(workdir, epochs=4)  # the seed files are now of other settings
    cut_short = run_dir / ".seed_001.pt.999.tmp"
    cut_short.write_bytes(b"half")
    stale = torch.load(run_dir / "seed_001.pt", weights_only=False)["fingerprint"]
    train_cell(["cora", "cadnet"])
    assert not cut_short.exists() and torch.load(run_dir / "seed_001.pt", weights_only=False)["fingerprint"] != stale
    assert (workdir / "data/stash/cora/cadnet" / stale / "seed_001.pt").exists()


# ------------------------------------------------------------------------ the stage as a process

def test_a_second_train_of_the_same_family_is_refused(workdir):
    _cora_workdir(workdir, runs=2, epochs=2)
    with store.family_lock("cora", "cadnet", "cora/cadnet"):
        with pytest.raises(loop.TrainingError) as info:
            train_cell(["cora", "cadnet"])
        assert "cora/cadnet: process" in str(info.value) and "is training this cell now" in str(info.value)
    assert not list((workdir / "data/runs/cora/cadnet/main").glob("seed_*.pt"))
    train_cell(["cora", "cadnet"])  # the lock went with its holder
    assert len(list((workdir / "data/runs/cora/cadnet/main").glob("seed_*.pt"))) == 2


def _stage_process(workdir, *argv: str) -> subprocess.Popen:
    from pipeline import check

    check.write_specs(config.load_params())  # as the check stage would have before it
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "DVC_NO_ANALYTICS": "1"}
    # Ctrl-C as a terminal sends it, even where pytest itself runs as a background job (whose
    # children inherit SIGINT ignored, so Python would install no handler for it)
    return subprocess.Popen([sys.executable, "-m", *argv], cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(condition, process: subprocess.Popen) -> None:
    """Until ``condition()``, while ``process`` runs: a loaded machine only makes the wait
    longer; the process ending first fails the test."""
    while not condition():
        assert process.poll() is None, f"the process ended first: {(process.communicate()[1] or '')[-2000:]}"
        time.sleep(0.05)


def test_ctrl_c_in_train_is_one_line_and_keeps_the_finished_seeds(workdir):
    run_dir = _cora_workdir(workdir, runs=40, seed_chunk=1, epochs=400)
    proc = _stage_process(workdir, "pipeline.train", "cora", "cadnet")
    _wait_for(lambda: len(list(run_dir.glob("seed_*.pt"))) >= 1, process=proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate()  # an unheard Ctrl-C trains all 40 seeds and fails below, however slow the machine
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.splitlines()[-1].startswith("interrupted: every seed file finished"), err
    kept = sorted(run_dir.glob("seed_*.pt"))
    assert 1 <= len(kept) < 40 and not list(run_dir.glob(".*.tmp"))
    assert all(torch.load(p, weights_only=False)["seed"] == int(p.stem[5:]) for p in kept)


def test_a_full_disk_in_train_is_one_line_naming_the_file_and_keeping_the_seeds_before_it(workdir, monkeypatch, capsys):
    from pipeline import check

    run_dir = _cora_workdir(workdir, runs=4, seed_chunk=1, epochs=2)
    check.write_specs(config.load_params())
    real_write = Path.write_bytes
    written = []

    def write_until_full(self, data):
        if len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(self)
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_until_full)
    with pytest.raises(SystemExit) as info:
        config.run_main(train.main, ["cora", "cadnet"], kept="every seed file finished before it is kept")
    message = str(info.value.code)
    assert message == ("error: data/runs/cora/cadnet/main/seed_002.pt: no space left on device; every seed file "
                       "finished before it is kept; free some space and run it again")
    assert sorted(p.name for p in run_dir.iterdir()) == ["seed_000.pt", "seed_001.pt"]


def test_a_killed_train_takes_its_worker_processes_with_it(tmp_path):
    """kill -9 of a stage cannot stop its joblib workers; each worker sees its parent gone."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys, time\n"
        "from joblib import Parallel, delayed\n"
        "from pipeline.engine.dispatch import exit_with_parent\n"
        "def work(folder):\n"
        "    exit_with_parent(0.05)\n"
        "    open(os.path.join(folder, str(os.getpid())), 'w').close()\n"
        "    time.sleep(120)\n"
        "    open(os.path.join(folder, 'slept out'), 'w').close()  # never noticed its parent gone\n"
        f"Parallel(n_jobs=2)(delayed(work)({str(tmp_path)!r}) for _ in range(2))\n")
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    parent = subprocess.Popen([sys.executable, str(script)], env=env)
    pids = lambda: [int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()]  # noqa: E731
    try:
        _wait_for(lambda: len(pids()) == 2, process=parent)  # its workers sleep 120 s once started
    finally:
        parent.kill()
        parent.wait()

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # a zombie is gone already

    # a wait on the workers themselves, however slow the machine: they notice within 0.05 s, and
    # one that never noticed ends with its sleep, saying so
    while any(alive(pid) for pid in pids()) and not (tmp_path / "slept out").exists():
        time.sleep(0.05)
    assert not (tmp_path / "slept out").exists(), "a worker outlived its parent until its own sleep ended"


def test_a_study_point_that_writes_a_default_out_copies_table_2s_seeds(workdir, capsys):
    """GCN at range 2 is Table 2's GCN with its two layers written out: another seed identity,
    the same network. The check stage's plan counts Table 2's seed as found; the seed is copied
    from Table 2's cell, records its own identity, and its table is Table 2's, with none trained."""
    (workdir / "data/processed/cora").mkdir(parents=True)
    save_torch(synthetic_graph(), workdir / "data/processed/cora/graph.pt")
    own = config.load_params()["method_hparams"]
    update_params(workdir, datasets=["cora"], methods=["gcn"], runs=1, variants={"datasets": [], "methods": [], "runs": {}},
                  baselines={"datasets": ["cora"], "methods": ["gcn"], "runs": {}},
                  method_hparams={**own, "gcn": {**own["gcn"], "epochs": 3, "hidden": 4}})
    train_cell(["cora", "gcn"])
    params = read_params(workdir)
    params["studies"]["ranges"] = {"datasets": ["cora"], "methods": ["gcn"], "runs": 1, "grid": {"range": [2]}}
    write_params(workdir, params)
    plan = check.plan_lines(config.load_params(), "cpu", {})
    assert [line for line in plan if line.startswith("  cora/gcn/ranges-range=2: ")][0].startswith(
        "  cora/gcn/ranges-range=2: 1 seeds (1 found trained), ")
    capsys.readouterr()
    train_cell(["cora", "gcn"])
    assert "train cora/gcn/ranges-range=2: 1 seeds, 1 reused, 0 to train" in capsys.readouterr().err
    cell = config.Cell("ranges", "cora", "gcn", (("range", 2),))
    record = torch.load(workdir / "data/runs/cora/gcn/ranges-range=2/seed_000.pt", weights_only=False)
    assert record["fingerprint"] == spec.seed_identity(spec.cell_spec(config.load_params(), cell), 1)
    folder = workdir / "reports/eval/cora/gcn"
    assert (folder / "ranges-range=2.csv").read_text() == (folder / "main.csv").read_text()


def test_a_family_trains_the_cells_whose_spec_moved_and_keeps_the_others(workdir, capsys):
    """Cells of several studies in one (dataset, method): a new grid value trains that cell only,
    the others' tables (written under their spec) are kept as they are; a value dropped takes
    its tables out of the family's folder; a grid value is the setting the cell trains with."""
    _cora_workdir(workdir, runs=2, epochs=3)
    params = read_params(workdir)
    params["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 1, "grid": {"beta": [0.5]}}
    write_params(workdir, params)
    train_cell(["cora", "cadnet"])
    folder = workdir / "reports/eval/cora/cadnet"
    assert sorted(p.name for p in folder.iterdir()) == [
        "_written.json", "beta-beta=0.5.csv", "beta-beta=0.5_epochs.csv", "beta-beta=0.5_gamma.csv",
        "main.csv", "main_epochs.csv", "main_gamma.csv"]
    record = torch.load(workdir / "data/runs/cora/cadnet/beta-beta=0.5/seed_000.pt", weights_only=False)
    hp = config.cell_hparams(config.load_params(), config.Cell("beta", "cora", "cadnet", (("beta", 0.5),)))
    assert hp["beta"] == 0.5
    assert record["test_acc"] == loop.train_chunk(synthetic_graph(), hp, [0], "cpu", "cadnet")[0]["test_acc"]
    before = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.csv")}

    params["studies"]["beta"]["grid"]["beta"] = [0.5, 0.9]
    write_params(workdir, params)
    capsys.readouterr()
    train_cell(["cora", "cadnet"])
    err = capsys.readouterr().err
    assert "2 of its 3 cells' tables were written under their spec already; kept" in err
    assert "train cora/cadnet/beta-beta=0.9: 1 seeds, 0 reused, 1 to train" in err and "cora/cadnet/main:" not in err
    assert {p.name: p.stat().st_mtime_ns for p in folder.glob("*.csv") if p.name in before} == before

    params["studies"]["beta"]["grid"]["beta"] = [0.9]
    write_params(workdir, params)
    train_cell(["cora", "cadnet"])
    assert not (folder / "beta-beta=0.5.csv").exists() and (folder / "beta-beta=0.9.csv").exists()
    assert set(json.loads((folder / "_written.json").read_text())) == {"main", "beta-beta=0.9"}
    assert (workdir / "data/runs/cora/cadnet/beta-beta=0.5/seed_000.pt").exists()  # its seed is kept


def test_seed_files_of_the_layout_without_cell_folders_are_taken_by_the_cell_of_their_spec(workdir, capsys):
    """data/runs/<dataset>/<method>/seed_NNN.pt (before a family held several cells) go to the
    stash under their identity, and the cell of that identity takes them back: nothing retrains."""
    run_dir = _cora_workdir(workdir, runs=2, epochs=3)
    train_cell(["cora", "cadnet"])
    before = _records(run_dir)
    for path in run_dir.glob("seed_*.pt"):
        path.rename(run_dir.parent / path.name)
    run_dir.rmdir()
    _forget_tables(workdir)
    capsys.readouterr()
    train_cell(["cora", "cadnet"])
    assert "2 seeds, 2 reused, 0 to train" in capsys.readouterr().err
    assert {k: r["test_acc"] for k, r in _records(run_dir).items()} == {k: r["test_acc"] for k, r in before.items()}
    assert not list(run_dir.parent.glob("seed_*.pt"))


def test_a_table_edited_after_train_wrote_it_is_written_again_from_the_seeds(workdir):
    """_written.json holds each cell's tables' checksum beside its spec's hash: a table changed
    by hand is not one train wrote, so train writes it again from the seeds (training none)."""
    _cora_workdir(workdir, runs=2, epochs=3)
    train_cell(["cora", "cadnet"])
    table = workdir / "reports/eval/cora/cadnet/main.csv"
    written = table.read_text()
    table.write_text(written.replace(",0.", ",0.9", 1))
    train_cell(["cora", "cadnet"])
    assert table.read_text() == written


def test_a_kept_cell_puts_its_seeds_back_in_data_runs(workdir):
    """Back to settings whose tables are committed (`git checkout params.yaml reports/`): train
    keeps the tables, and still moves the seeds of those settings back from the stash, so that
    data/runs holds the seeds the committed tables came from (what a DVC remote then carries)."""
    run_dir = _cora_workdir(workdir, runs=2, epochs=3)
    train_cell(["cora", "cadnet"])
    first = {k: r["fingerprint"] for k, r in _records(run_dir).items()}
    committed = workdir / "committed"
    shutil.copytree(workdir / "reports/eval/cora/cadnet", committed)
    update_params(workdir, epochs=4)
    train_cell(["cora", "cadnet"])
    assert {r["fingerprint"] for r in _records(run_dir).values()} != set(first.values())
    update_params(workdir, epochs=3)
    shutil.rmtree(workdir / "reports/eval/cora/cadnet")
    shutil.copytree(committed, workdir / "reports/eval/cora/cadnet")
    train_cell(["cora", "cadnet"])
    assert {k: r["fingerprint"] for k, r in _records(run_dir).items()} == first


def test_a_familys_cells_that_differ_in_replica_settings_train_as_one_batch(workdir, capsys):
    """A beta study's and a label-rate study's cells beside Table 2's: the cells that differ only in
    beta and their training nodes train side by side as replicas of one batch, each seed saved
    in its own cell's folder under its own cell's identity, with its cell's numbers; a cell of
    another hidden width trains in a batch of its own."""
    _cora_workdir(workdir, runs=2, epochs=3)
    params = read_params(workdir)
    params["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2, "grid": {"beta": [0.2, 0.9]}}
    params["studies"]["label_rates"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2,
                                        "settings": {"split": "public_subset"}, "grid": {"train_per_class": [2]}}
    params["studies"]["hidden_units"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2, "grid": {"hidden": [8]}}
    write_params(workdir, params)
    train_cell(["cora", "cadnet"])
    err = capsys.readouterr().err
    assert "train cora/cadnet/4 cells as one batch (main .. label_rates-train_per_class=2): 8 seeds, 0 reused, 8 to train" in err
    assert "train cora/cadnet/hidden_units-hidden=8: 2 seeds, 0 reused, 2 to train" in err
    loaded = config.load_params()
    for name, cell in [("beta-beta=0.2", config.Cell("beta", "cora", "cadnet", (("beta", 0.2),))),
                       ("label_rates-train_per_class=2", config.Cell("label_rates", "cora", "cadnet", (("train_per_class", 2),)))]:
        hp = config.cell_hparams(loaded, cell)
        alone = loop.train_chunk(synthetic_graph(), hp, [0, 1])
        for seed in (0, 1):
            record = torch.load(workdir / f"data/runs/cora/cadnet/{name}/seed_{seed:03d}.pt", weights_only=False)
            assert record["fingerprint"] == spec.seed_identity(spec.cell_spec(loaded, cell))
            assert record["history"]["test_acc"] == pytest.approx(alone[seed]["history"]["test_acc"], rel=1e-5, abs=1e-6)
