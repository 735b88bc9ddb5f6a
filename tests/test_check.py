"""pipeline/check.py: the stage that validates all of params.yaml before any other runs."""
from __future__ import annotations

import json

import pytest
import torch

from conftest import NO_VARIANTS, read_params, update_params, write_params
from pipeline import check, config
from pipeline.models import REGISTRY
from pipeline.paths import CHECKED_FILE
from pipeline.engine.spec import COMPONENTS, spec_file


def test_valid_params_print_the_plan_and_write_the_same_line_whatever_the_values(workdir, capsys):
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=7, variants=NO_VARIANTS, baselines=NO_VARIANTS, device="cpu")
    check.main([])
    first = (workdir / CHECKED_FILE).read_text()
    err = capsys.readouterr().err
    assert "`dvc repro` trains 1 cells on cpu now" in err and "cora/cadnet/main: 7 seeds" in err
    update_params(workdir, runs=9, beta=0.5)
    check.main([])
    assert (workdir / CHECKED_FILE).read_text() == first  # downstream stages see no change


def cell_spec_file(dataset, method):
    """The spec of (dataset, method)'s one cell in these tests: that of its study of Tables 2 and 3."""
    return spec_file(dataset, method, config.table_cell_name(config.load_params(), method))


def spec_of(workdir, dataset, method) -> dict:
    return json.loads((workdir / cell_spec_file(dataset, method)).read_text())


def test_each_cell_gets_its_own_spec(workdir):
    """The files the train and evaluate stages depend on: one per cell, holding its resolved
    count and settings, so that a change to one cell's count changes that cell's file only."""
    update_params(workdir, datasets=["cora", "citeseer"], methods=["cadnet"], runs=7, runs_by_dataset={"citeseer": 3},
                  variants=NO_VARIANTS, baselines={"datasets": ["cora"], "methods": ["gcn", "mixhop"], "runs": {"cora": {"mixhop": 0}}},
                  device="cpu")
    check.main([])
    cells = [("cora", "cadnet"), ("citeseer", "cadnet"), ("cora", "gcn"), ("cora", "mixhop")]
    specs = {cell: spec_of(workdir, *cell) for cell in cells}
    assert {cell: spec["runs"] for cell, spec in specs.items()} == {
        ("cora", "cadnet"): 7, ("citeseer", "cadnet"): 3, ("cora", "gcn"): 7, ("cora", "mixhop"): 0}
    assert specs[("cora", "cadnet")]["settings"] == config.hparams_for(config.load_params(), "cora", "cadnet")
    assert specs[("cora", "gcn")]["settings"]["hidden"] == 16 and "beta" not in specs[("cora", "gcn")]["settings"]
    # a vmapped baseline's seeds depend on their chunk; CAD-Net's and the sparse implementation's
    # (GCN on Cora, params.yaml) do not
    assert specs[("cora", "mixhop")]["chunking"] == {"seed_chunk": 25, "memory_budget_gb": 6}
    assert "chunking" not in specs[("cora", "cadnet")] and "chunking" not in specs[("cora", "gcn")]
    assert specs[("cora", "cadnet")]["code"] == {**COMPONENTS, "network": REGISTRY["cadnet"].version}
    texts = {cell: (workdir / cell_spec_file(*cell)).read_text() for cell in cells}
    update_params(workdir, baselines={"datasets": ["cora"], "methods": ["gcn", "mixhop"], "runs": {"cora": {"mixhop": 5}}})
    check.main([])
    assert spec_of(workdir, "cora", "mixhop")["runs"] == 5
    assert {cell: (workdir / cell_spec_file(*cell)).read_text() for cell in cells if cell != ("cora", "mixhop")} == \
        {cell: text for cell, text in texts.items() if cell != ("cora", "mixhop")}


def test_a_value_changes_the_specs_of_the_cells_that_read_it_only(workdir, capsys):
    """The one judge: Cora's beta moves Cora's CAD-Net-family specs and no other; a baseline's own
    key moves that baseline's; a global override every cell that reads it."""
    update_params(workdir, datasets=["cora", "citeseer"], methods=["cadnet"], runs=3, device="cpu",
                  variants={"datasets": ["cora", "citeseer"], "methods": ["rw"], "runs": {}},
                  baselines={"datasets": ["cora", "citeseer"], "methods": ["gcn", "sgc"], "runs": {}})
    check.main([])
    cells = [(d, m) for d in ("cora", "citeseer") for m in ("cadnet", "rw", "gcn", "sgc")]

    def texts():
        return {cell: (workdir / cell_spec_file(*cell)).read_text() for cell in cells}

    def moved(before):
        check.main([])
        return sorted(cell for cell, text in texts().items() if text != before[cell])

    params = read_params(workdir)
    before = texts()
    update_params(workdir, hparams={**params["hparams"], "cora": {**params["hparams"]["cora"], "beta": 0.9}})
    capsys.readouterr()
    assert moved(before) == [("cora", "cadnet"), ("cora", "rw")]
    beta = params["hparams"]["cora"]["beta"]
    err = capsys.readouterr().err
    assert err.startswith("`dvc repro` trains 8 cells on cpu now (their tables were not written under their spec): ")
    assert f"  cora/cadnet/main: 3 seeds, no measured figure for cora yet" in err
    assert f"; settings.beta: {beta} -> 0.9\n" in err and err.count(f"settings.beta: {beta} -> 0.9") == 2
    assert "  citeseer/cadnet/main: 3 seeds, no measured figure for citeseer yet (run `python -m pipeline.bench " \
           "--datasets citeseer`); its tables were not written under this spec\n" in err
    before = texts()
    update_params(workdir, method_hparams={**params["method_hparams"], "sgc": {**params["method_hparams"]["sgc"], "K": 3}})
    assert moved(before) == [("citeseer", "sgc"), ("cora", "sgc")]
    before = texts()
    update_params(workdir, lambda_ent=0.05)
    assert moved(before) == [("citeseer", "cadnet"), ("citeseer", "rw"), ("cora", "cadnet"), ("cora", "rw")]


def test_a_cell_reading_anothers_settings_has_them_in_its_spec(workdir):
    """mixhop_l2 reads method_hparams.mixhop: its spec changes when that block changes what it
    trains with, and only then (kernel_lasso it holds at 0)."""
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=7, baselines={"datasets": ["cora"],
                  "methods": ["mixhop"], "runs": {}}, variants={"datasets": ["cora"], "methods": ["mixhop_l2"], "runs": {}},
                  device="cpu")
    check.main([])
    l2_only = workdir / cell_spec_file("cora", "mixhop_l2")
    first = l2_only.read_text()
    assert spec_of(workdir, "cora", "mixhop_l2")["settings"]["kernel_lasso"] == 0.0
    params = read_params(workdir)
    update_params(workdir, method_hparams={**params["method_hparams"], "mixhop": {**params["method_hparams"]["mixhop"],
                                                                                  "kernel_lasso": 0.5}})
    check.main([])
    assert l2_only.read_text() == first  # a key mixhop_l2 holds at 0: nothing it trains with moved
    params = read_params(workdir)
    update_params(workdir, method_hparams={**params["method_hparams"], "mixhop": {**params["method_hparams"]["mixhop"],
                                                                                  "p_drop": 0.5}})
    check.main([])
    assert spec_of(workdir, "cora", "mixhop_l2")["settings"]["p_drop"] == 0.5


def test_a_bad_row_of_an_unselected_dataset_fails_without_writing(workdir):
    update_params(workdir, datasets=["cora"], methods=["cadnet"], variants=NO_VARIANTS, baselines=NO_VARIANTS)
    params = config.load_params()
    params["hparams"]["physics"]["K"] = 0
    import yaml

    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(config.ConfigError, match=r"hparams\.physics\.K"):
        check.main([])
    assert not (workdir / CHECKED_FILE).exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_names_the_allowed_values(workdir):
    update_params(workdir, device="cuda")
    with pytest.raises(config.ConfigError) as info:
        check.main([])
    assert "device" in str(info.value) and "allowed values here: auto, cpu" in str(info.value)
    assert check.resolve_device_name("auto") == "cpu"


@pytest.mark.parametrize("implementation", ["vmap", "sparse"])
def test_the_plan_warns_under_a_cell_whose_one_seed_would_pass_the_machines_memory(workdir, capsys, monkeypatch,
                                                                                   implementation):
    """SGC's PyG network (vmap) sends the features along every edge; its sparse network does not."""
    params = update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=2, variants=NO_VARIANTS, device="cpu",
                           baselines={"datasets": ["cora"], "methods": ["sgc", "gcn"], "runs": {"cora": {"sgc": 3, "gcn": 3}}})
    params["method_hparams"]["sgc"]["cora"] = {**params["method_hparams"]["sgc"].get("cora", {}),
                                               "implementation": implementation}
    write_params(workdir, params)
    (workdir / "reports/data").mkdir(parents=True)
    (workdir / "reports/data/cora.json").write_text('{"nodes": 2708, "directed_edges": 10556, "features": 1433}')
    monkeypatch.setattr(check.plan, "machine_memory_bytes", lambda: 10**6)  # a machine of 1 MB
    check.main([])
    lines = capsys.readouterr().err.splitlines()
    sgc = next(i for i, line in enumerate(lines) if "cora/sgc/baselines: 3 seeds" in line)
    warned = lines[sgc + 1].strip().startswith("warning: cora/sgc passes its input features along every edge")
    assert warned == (implementation == "vmap")
    assert not any("warning: cora/gcn" in line or "warning: cora/cadnet" in line for line in lines)


def test_the_plan_divides_by_the_workers_only_for_cells_trained_seed_by_seed(workdir, capsys, monkeypatch):
    """Graph U-Net cannot be batched: the single engine trains n_jobs of its seeds at once on CPU."""
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=4, variants=NO_VARIANTS, device="cpu",
                  n_jobs=2, baselines={"datasets": ["cora"], "methods": ["gcn", "graph_unet"], "runs": {"cora": {}}})
    monkeypatch.setattr(check.plan, "measured_per_seed", lambda *args, **kwargs: (60.0, "a figure"))
    check.main([])
    err = capsys.readouterr().err
    assert "cora/gcn/baselines: 4 seeds, ~4.0 min" in err and "cora/graph_unet/baselines: 4 seeds, ~2.0 min" in err
    assert "`dvc repro` trains 3 cells on cpu now (their tables were not written under their spec): 12 seeds to " \
           "train, ~10.0 min" in err  # cadnet 4 + gcn 4 + graph_unet 2
    assert "  baselines: 2 cells, ~6.0 min\n" in err


@pytest.mark.parametrize("seed_chunk, budget_gb, expected", [
    (2, 6, "~2.0 min"),  # two chunks of two seeds, one in each of two workers
    (4, 6, "~4.0 min"),  # one chunk: one worker
    (2, 0.01, "~4.0 min"),  # two chunks whose estimated peaks do not fit the budget together
])
def test_the_plan_divides_by_the_chunk_workers_that_run_a_batched_cells_chunks(workdir, capsys, monkeypatch,
                                                                              seed_chunk, budget_gb, expected):
    """chunk_workers 2 on CPU: a batched cell's chunks train two at a time, as the train stage
    runs them, where they are two and fit memory_budget_gb together."""
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=4, variants=NO_VARIANTS, device="cpu",
                  chunk_workers=2, seed_chunk=seed_chunk, memory_budget_gb=budget_gb,
                  baselines={"datasets": ["cora"], "methods": ["gcn"], "runs": {"cora": {}}})
    (workdir / "reports/data").mkdir(parents=True)
    (workdir / "reports/data/cora.json").write_text(
        '{"nodes": 2708, "directed_edges": 13264, "features": 1433, "classes": 7}')
    monkeypatch.setattr(check.plan, "measured_per_seed", lambda *args, **kwargs: (60.0, "a figure"))
    check.main([])
    err = capsys.readouterr().err
    assert f"cora/gcn/baselines: 4 seeds, {expected}" in err


@pytest.mark.parametrize("rates, expected", [
    ([5, 10, 15], "~60 s"),  # three cells of two seeds, one batch: chunks of two, two at a time
    ([5], "~2.0 min"),  # one cell: one chunk of two, one worker
])
def test_the_plan_costs_cells_batched_as_replicas_by_their_batchs_chunks(workdir, capsys, monkeypatch, rates, expected):
    """The train stage batches CAD-Net's label-rate cells as replicas of one batch (they differ
    only in their split): their chunks run two at a time, though each cell alone is one chunk."""
    params = update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=2, variants=NO_VARIANTS,
                           baselines=NO_VARIANTS, device="cpu", chunk_workers=2, seed_chunk=2)
    params["studies"]["main"]["runs"] = {"default": 0}
    params["studies"]["label_rates"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": {},
                                        "grid": {"train_per_class": rates}}
    write_params(workdir, params)
    monkeypatch.setattr(check.plan, "measured_per_seed", lambda *args, **kwargs: (60.0, "a figure"))
    check.main([])
    err = capsys.readouterr().err
    assert f"cora/cadnet/label_rates-train_per_class=5: 2 seeds, {expected}" in err
    assert f"  label_rates: {len(rates)} cells, {expected if len(rates) == 1 else '~3.0 min'}\n" in err


def test_the_chunk_settings_are_in_the_file_of_a_cell_whose_seeds_depend_on_them(workdir):
    """A vmapped baseline's seeds share their chunk's dropout stream, so its chunk cap and memory
    budget are in its spec (DVC reruns its stages when they move); CAD-Net's seeds do not depend on
    their chunk, nor do those of a baseline's sparse implementation (SGC on Cora, params.yaml) or of
    one trained seed by seed: their specs stay as they were."""
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=4, variants=NO_VARIANTS,
                  baselines={"datasets": ["cora"], "methods": ["mixhop", "sgc", "graph_unet"], "runs": {}}, device="cpu")
    check.main([])
    files = {m: workdir / cell_spec_file("cora", m) for m in ("cadnet", "mixhop", "sgc", "graph_unet")}
    before = {m: f.read_text() for m, f in files.items()}
    for changes in ({"seed_chunk": 1}, {"memory_budget_gb": 2}):
        update_params(workdir, **changes)
        check.main([])
        assert files["mixhop"].read_text() != before["mixhop"], changes
        assert all(files[m].read_text() == before[m] for m in ("cadnet", "sgc", "graph_unet"))
        before["mixhop"] = files["mixhop"].read_text()
    params = read_params(workdir)
    update_params(workdir, method_hparams={**params["method_hparams"], "mixhop": {**params["method_hparams"]["mixhop"],
                                                                               "cora": {"seed_chunk": 2}}})
    check.main([])
    assert spec_of(workdir, "cora", "mixhop")["chunking"]["seed_chunk"] == 2


def test_a_memory_budget_below_one_seed_of_a_cell_stops_at_the_check_stage(workdir):
    """From reports/data's counts, before any train stage would refuse it; nothing written."""
    from conftest import write_data_stats

    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=2, variants=NO_VARIANTS, baselines=NO_VARIANTS,
                  device="cpu", memory_budget_gb=5.0e-4)
    check.main([])  # no counts yet (not preprocessed): the train stage's own check will do
    write_data_stats(workdir, "cora")
    stats = workdir / "reports/data/cora.json"
    import json

    stats.write_text(json.dumps({**json.loads(stats.read_text()), "directed_edges": 13264}))
    (workdir / "data").rename(workdir / "data_before")
    with pytest.raises(config.ConfigError) as info:
        check.main([])
    assert "memory_budget_gb: 0.0005 GB is below the estimated peak of one seed of cora/cadnet" in str(info.value)
    assert not (workdir / "data").exists()
    update_params(workdir, memory_budget_gb=0.5)
    check.main([])


def test_the_plans_total_says_how_many_cells_it_costs_from_another_kind_of_machine(workdir, capsys, monkeypatch):
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=2, variants=NO_VARIANTS, device="cpu",
                  baselines={"datasets": ["cora"], "methods": ["gcn"], "runs": {}})
    sources = {"cadnet": "cora/cadnet", "gcn": f"cora/gcn on cuda (NVIDIA H200), {check.plan.OTHER_MACHINE} than this cpu"}
    monkeypatch.setattr(check.plan, "measured_per_seed", lambda dataset, method, **kwargs: (1.0, sources[method]))
    check.main([])
    assert ("the whole selection, for reference: 2 cells, ~4 s if each trained from scratch at the committed run's "
            "speed (1 cells of it from another kind of machine's figures):") in capsys.readouterr().err.splitlines()


def test_a_spec_file_that_is_not_a_spec_is_written_again(workdir, capsys):
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=3, variants=NO_VARIANTS, baselines=NO_VARIANTS,
                  device="cpu")
    check.main([])
    path = workdir / cell_spec_file("cora", "cadnet")
    written = path.read_text()
    path.write_text(written[:40])  # cut short
    capsys.readouterr()
    check.main([])
    assert path.read_text() == written
    assert "; its old file was not a spec\n" in capsys.readouterr().err


def test_a_new_grid_value_adds_a_cells_spec_and_moves_no_other_and_a_dropped_one_goes(workdir, capsys):
    """A study's grid is cells of their own in their (dataset, method)'s family folder: a value
    more is a spec more (no other file of the family moves), a value less removes its spec; a
    family that no study trains holds its index alone, so that its folder exists in a clone."""
    params = update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=3, variants=NO_VARIANTS,
                           baselines=NO_VARIANTS, device="cpu")
    params["methods"] = ["cadnet", "gcn"]
    params["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2, "grid": {"beta": [0.5, 0.9]}}
    write_params(workdir, params)
    check.main([])
    family = workdir / "data/specs/cora/cadnet"
    assert sorted(p.name for p in family.iterdir()) == ["_cells.json", "beta-beta=0.5.json", "beta-beta=0.9.json", "main.json"]
    assert json.loads((family / "_cells.json").read_text()) == ["main", "beta-beta=0.5", "beta-beta=0.9"]
    spec = json.loads((family / "beta-beta=0.5.json").read_text())
    assert (spec["study"], spec["setting"], spec["settings"]["beta"], spec["runs"]) == ("beta", {"beta": 0.5}, 0.5, 2)
    assert sorted(p.name for p in (workdir / "data/specs/cora/gcn").iterdir()) == ["_cells.json"]
    before = {p.name: p.read_text() for p in family.iterdir()}
    params["studies"]["beta"]["grid"]["beta"] = [0.5, 0.9, 0.95]
    write_params(workdir, params)
    capsys.readouterr()
    check.main([])
    after = {p.name: p.read_text() for p in family.iterdir()}
    assert {name for name in after if after[name] != before.get(name)} == {"beta-beta=0.95.json", "_cells.json"}
    assert "  cora/cadnet/beta-beta=0.95: 2 seeds, no measured figure for cora yet (run `python -m pipeline.bench " \
           "--datasets cora`); new cell\n" in capsys.readouterr().err
    params["studies"]["beta"]["grid"]["beta"] = [0.5]
    write_params(workdir, params)
    check.main([])
    assert sorted(p.name for p in family.iterdir()) == ["_cells.json", "beta-beta=0.5.json", "main.json"]
    assert "  cora/cadnet/beta-beta=0.9: no longer a cell of the studies" in capsys.readouterr().err


def test_the_plan_counts_a_studys_unrun_cells_in_one_line(workdir, capsys):
    params = update_params(workdir, datasets=["cora", "pubmed"], methods=["cadnet"], runs=3, device="cpu",
                           variants=NO_VARIANTS, baselines=NO_VARIANTS)
    params["studies"]["sweep"] = {"datasets": ["cora", "pubmed"], "methods": ["cadnet"],
                                  "runs": {"default": 0, "cora": 2}, "grid": {"beta": [0.1, 0.2, 0.3]}}
    write_params(workdir, params)
    check.main([])
    err = capsys.readouterr().err
    assert "cora/cadnet/sweep-beta=0.2: 2 seeds" in err
    assert ("  sweep: 3 cells (3 without a measured figure); 3 cells not run (runs 0): "
            "pubmed/cadnet/sweep-beta=0.1, pubmed/cadnet/sweep-beta=0.2, pubmed/cadnet/sweep-beta=0.3\n") in err
    assert "pubmed/cadnet/sweep-beta=0.1: not run" not in err


def _class_counts(workdir, dataset: str, sizes: list[int], public: list[int] | None) -> None:
    import json

    folder = workdir / "reports/data"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{dataset}.classes.json").write_text(json.dumps({"nodes_per_class": sizes,
                                                                 "public_train_per_class": public}))


@pytest.mark.parametrize("study, grid, split, message", [
    ("label_rates", {"train_per_class": [5, 25]}, {},
     "studies.label_rates.grid.train_per_class: 25 in cora/cadnet/label_rates-train_per_class=25, but cora's smallest "
     "class has 20 public training nodes; allowed there: at most 20"),
    ("random_splits", {"train_per_class": [200]}, {"split": "random_planetoid"},
     "studies.random_splits.grid.train_per_class: 200 in cora/cadnet/random_splits-train_per_class=200, but cora's "
     "smallest class has 180 nodes; allowed there: at most 180"),
    ("random_splits", {"train_per_class": [173]}, {"split": "random_planetoid"},  # 2708 - 7 x 173 = 1497
     "studies.random_splits.grid.train_per_class: 173 in cora/cadnet/random_splits-train_per_class=173 leaves 1497 of "
     "cora's nodes outside the training set; the split needs 1500"),
    ("random_splits", {"val_per_class": [170]}, {"split": "per_class", "train_per_class": 20},
     "studies.random_splits.grid.val_per_class: train_per_class + val_per_class = 190 in "
     "cora/cadnet/random_splits-val_per_class=170, but cora's smallest class has 180 nodes; allowed there: at most 180"),
])
def test_a_split_the_datasets_classes_cannot_hold_stops_at_the_check_stage(workdir, study, grid, split, message):
    """Named with its study, key and dataset, from preprocess's class sizes, before train reaches
    the cell; a grid the classes hold passes."""
    update_params(workdir, datasets=["cora"], methods=["cadnet"], runs=2, variants=NO_VARIANTS, baselines=NO_VARIANTS,
                  device="cpu")
    params = read_params(workdir)
    split = {"split": "public_subset", **split} if study == "label_rates" else split
    update_params(workdir, studies={**params["studies"], study: {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2,
                                                                 "settings": split, "grid": grid}})
    check.main([])  # no class sizes yet (not preprocessed): the train stage's own check will do
    _class_counts(workdir, "cora", [351, 217, 418, 818, 426, 298, 180], [20] * 7)
    with pytest.raises(config.ConfigError) as info:
        check.main([])
    assert str(info.value) == message
    fits = {key: [5] for key in grid}
    update_params(workdir, studies={**params["studies"], study: {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2,
                                                                 "settings": split, "grid": fits}})
    check.main([])


@pytest.mark.parametrize("runs, key", [({"cora": 0}, "studies.main.runs.cora"), (0, "studies.main.runs")])
def test_no_runs_for_a_trained_cell_stops_at_the_check_stage(evaluated, runs, key):
    """Before DVC deletes any output and train rewrites the table empty; deleting the table
    first is how results are dropped on purpose."""
    studies = read_params(evaluated)["studies"]
    update_params(evaluated, studies={**studies, "main": {**studies["main"], "runs": runs}})
    before = {path: path.read_bytes() for path in (evaluated / "reports").rglob("*") if path.is_file()}
    with pytest.raises(config.ConfigError) as info:
        check.main([])
    assert str(info.value) == (f"{key}: 0 for cora/cadnet/main, but reports/eval/cora/cadnet/main.csv holds 3 seeds, "
                               "which train would drop; to drop them, delete that table first")
    assert {path: path.read_bytes() for path in (evaluated / "reports").rglob("*") if path.is_file()} == before
    (evaluated / "reports/eval/cora/cadnet/main.csv").unlink()
    check.main([])


def test_the_plan_leads_with_what_trains_now_and_a_spec_moved_back_is_not_listed(evaluated, capsys):
    """Train's record of the spec each cell's tables were written from decides: nothing to train
    at first; Cora's beta moved, its one cell, with what moved; the seeds already in its folder
    counted where only their number moved; back at the committed settings, nothing again, and
    the whole selection's cost comes after, labelled."""
    from pipeline.engine.spec import cell_spec
    from pipeline.report.tables import write_written, written_record

    from conftest import FAKE_ACCS, fake_record
    from pipeline.engine.spec import seed_identity

    params = config.load_params()
    (cell,) = config.cells(params)
    spec = cell_spec(params, cell)
    write_written("cora", "cadnet", {"main": written_record("cora", "cadnet", spec)})
    for seed, acc in enumerate(FAKE_ACCS):  # the seeds those tables came from, as train stores them
        torch.save(fake_record(seed, acc, fingerprint=seed_identity(spec)), evaluated / f"data/runs/cora/cadnet/main/seed_{seed:03d}.pt")
    capsys.readouterr()
    check.main([])
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "`dvc repro` trains nothing now: every cell's tables were written under its spec"
    assert lines[1].startswith("the whole selection, for reference: 1 cells, ")
    hparams = params["hparams"]
    update_params(evaluated, hparams={**hparams, "cora": {**hparams["cora"], "beta": 0.9}})
    check.main([])
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("`dvc repro` trains 1 cells on cpu now (their tables were not written under their "
                               "spec): 3 seeds to train")
    assert lines[1].startswith("  cora/cadnet/main: 3 seeds, ") and lines[1].endswith(
        f"; settings.beta: {hparams['cora']['beta']} -> 0.9")
    assert lines[2].startswith("the whole selection, for reference: 1 cells, ")
    update_params(evaluated, hparams=hparams, runs=5)
    check.main([])
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("`dvc repro` trains 1 cells on cpu now (their tables were not written under their "
                               "spec): 2 seeds to train")
    assert lines[1].startswith("  cora/cadnet/main: 5 seeds (3 found trained), ") and "runs: 3 -> 5" in lines[1]
    update_params(evaluated, runs=3)
    check.main([])
    lines = capsys.readouterr().err.splitlines()
    assert lines[:2] == ["`dvc repro` trains nothing now: every cell's tables were written under its spec",
                         "1 cells' specs are back to those their tables were written from: nothing to train for them"]


@pytest.mark.parametrize("change, message", [({"beta": 2}, "beta: got 2; allowed values: a number in [0, 1]"),
                                             ({"runs": "abc"}, "runs: got 'abc'"),
                                             ({"method_hparams.gat.heads": 0}, "method_hparams.gat.heads: got 0")])
def test_a_bad_value_is_named_before_torch_is_loaded(workdir, change, message):
    """Validation reads the registry's entries and schemas (pipeline/models/methods.py), not the
    networks: the stage's one line comes without loading torch or PyG, which on a loaded machine
    took most of a minute."""
    import subprocess
    import sys

    from conftest import PROJECT_ROOT

    params = read_params(workdir)
    for key, value in change.items():
        *path, last = key.split(".")
        block = params
        for part in path:
            block = block[part]
        block[last] = value
    write_params(workdir, params)
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('loaded:', [m for m in ('torch', 'torch_geometric') if m in sys.modules],"
              " file=sys.stderr))\n"
              "from pipeline import check, config\n"
              "config.run_main(check.main, [])\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=workdir, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert proc.returncode == 1, proc.stderr
    error, loaded = proc.stderr.splitlines()
    assert error.startswith(f"error: {message}") and loaded == "loaded: []", proc.stderr
