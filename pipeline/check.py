"""Check stage: ``python -m pipeline.check``. Validates all of params.yaml, then says what
`dvc repro` will train and roughly how long that takes, before anything else runs.

Every other stage depends on this stage's output, so DVC runs it first: a bad value stops
`dvc repro` before DVC deletes any stage's outputs (it removes them just before running a
stage's command, so a stage's own one-line error comes too late to save them). It depends on
params.yaml as a file, not on chosen keys, so every edit is checked: a misspelled top-level key
that no stage lists, or ``true`` turned into ``1`` (DVC compares param values with ``==``).
Its output holds the same line whatever the values, so it never makes a later stage rerun:
each of those reruns for the params it lists itself.

It also writes each cell's spec (:mod:`pipeline.engine.spec`) to ``data/specs/<dataset>/<method>/
<cell>.json``: its resolved settings, seeds, data and code versions. A family's folder of specs is
the one thing of params.yaml and of the code that its train and evaluate stages depend on, so a
value reruns exactly the families whose specs it changes, and train retrains the cells among
them whose spec moved: ``-S hparams.cora.beta=0.9`` Cora's CAD-Net cells,
``-S studies.baselines.runs.photo.gat=25`` Photo's GAT, a docstring or a moved function none.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from pipeline import config
from pipeline.engine import plan
from pipeline.files import write_text_atomic
from pipeline.models import REGISTRY
from pipeline.paths import CHECKED_FILE, DATA_STATS_ROOT, EVAL_ROOT, PARAMS_FILE, SPECS_ROOT, class_counts_file
from pipeline.report.tables import cells_with_tables, table_paths
from pipeline.progress import duration
from pipeline.engine.spec import INDEX_NAME, cell_spec, differences, family_dir, index_file, spec_file, spec_text


def resolve_device_name(name: str) -> str:
    """``auto``/``cpu``/``cuda`` -> the device training will use; ``cuda`` without one is an error."""
    if name == "cpu":
        return "cpu"
    import torch  # only for the question whether CUDA is there

    if torch.cuda.is_available():
        return "cuda"
    if name == "cuda":
        raise config.ConfigError("device: 'cuda' asked for but no CUDA device is available; "
                                 "allowed values here: auto, cpu")
    return "cpu"


def plan_lines(params: dict, device: str) -> list[str]:
    lines = [f"the selection trains {len(config.trained_cells(params))} cells on {device}: `dvc repro` trains a cell only where "
             f"its spec moved, and reuses the seeds already trained under it, so these times are upper bounds:"]
    total, unknown, elsewhere = 0.0, 0, 0
    memory = plan.machine_memory_bytes() if device == "cpu" else None
    baselines = config.baseline_methods(params)
    unrun: dict[str, list[config.Cell]] = {}
    for cell in config.cells(params):
        dataset, method = cell.dataset, cell.method
        runs = config.runs_for(params, cell)
        if runs == 0:
            unrun.setdefault(cell.study, []).append(cell)
            continue
        single = params.get("engine", "batched") == "single" or not REGISTRY[method].batched
        side_by_side = plan.workers_side_by_side(single, device, params.get("n_jobs", -1))
        measured = plan.cell_measured(params, cell, device, baselines)
        lines.append(f"  {cell}: {runs} seeds, "
                     + plan.estimate(dataset, method, runs, measured=measured, side_by_side=side_by_side))
        warning = plan.memory_warning(dataset, method, memory, hp=config.cell_hparams(params, cell))
        if warning:
            lines.append(f"    {warning}")
        if measured is None:
            unknown += 1
        else:
            total += measured[0] * runs / plan.seeds_at_once(runs, side_by_side)
            elsewhere += plan.OTHER_MACHINE in measured[1]
    for study, cells in unrun.items():  # a study's unrun cells in one line: the paper's studies have hundreds
        lines.append(f"  {study}: {len(cells)} cells not run (runs 0): {', '.join(map(str, cells[:3]))}"
                     + (", ..." if len(cells) > 3 else ""))
    lines.append(f"  all cells: ~{duration(total)} at the committed run's speed"
                 + (f", {elsewhere} cells of it from another kind of machine's figures" if elsewhere else "")
                 + (f", plus {unknown} cells without a measured figure" if unknown else ""))
    return lines


def check_memory_budget(params: dict, data_root: Path = DATA_STATS_ROOT) -> None:
    """Refuse a ``memory_budget_gb`` below one seed of a trained cell, which every train stage
    would refuse later. From the graph's counts in reports/data (features taken as empty: a
    lower bound of the train stage's estimate); a dataset not yet preprocessed is skipped."""
    from pipeline.train import peak_bytes_of, sizes_from_counts  # the train stage's own estimate

    budget = params.get("memory_budget_gb", 6)
    for cell in config.trained_cells(params):
        path = data_root / f"{cell.dataset}.json"
        counts = json.loads(path.read_text()) if path.exists() else {}
        if not {"nodes", "directed_edges", "features", "classes"} <= set(counts):
            continue
        hp = config.cell_hparams(params, cell)
        sizes = sizes_from_counts(hp, nodes=counts["nodes"], directed_edges=counts["directed_edges"],
                                  features=counts["features"], feature_nnz=0, classes=counts["classes"])
        one_seed = peak_bytes_of(sizes, hp, 1)
        if one_seed > budget * 2**30:
            raise config.ConfigError(f"memory_budget_gb: {budget} GB is below the estimated peak of one seed of "
                                     f"{cell} (at least {one_seed / 2**30:.3g} GB); raise it")


# the nodes outside the training set a random_planetoid split takes (pipeline.engine.splits:
# PyG's random_planetoid_splits' 500 validation and 1000 test nodes)
RANDOM_PLANETOID_REST = 500 + 1000


def check_splits_fit(params: dict, data_root: Path = DATA_STATS_ROOT) -> None:
    """Refuse a split a dataset's classes cannot hold (``train_per_class`` 25 of the public
    split's 20 a class), naming the key that set it, its study and the dataset, which the train
    stage would find only when it reached that cell. From preprocess's class sizes in
    reports/data; a dataset not yet preprocessed is skipped."""
    for cell in config.trained_cells(params):
        path = class_counts_file(cell.dataset, data_root)
        if not path.exists():
            continue
        counts = json.loads(path.read_text())
        sizes, public = counts["nodes_per_class"], counts["public_train_per_class"]
        hp = config.cell_hparams(params, cell)
        split, key = hp.get("split"), "train_per_class"
        if split == "public_subset" and public:
            need, have, what = hp["train_per_class"], min(public), "public training nodes"
        elif split == "random_planetoid":
            need, have, what = hp["train_per_class"], min(sizes), "nodes"
        elif split == "per_class":
            need, have, what = hp["train_per_class"] + hp["val_per_class"], min(sizes), "nodes"
            key = "val_per_class" if "val_per_class" in dict(cell.setting) else key
        else:
            continue
        where = where_set(params, cell, key)
        if need > have:
            needs = f"train_per_class + val_per_class = {need}" if split == "per_class" else str(need)
            raise config.ConfigError(f"{where}: {needs} in {cell}, but {cell.dataset}'s smallest class has {have} {what}; "
                                     f"allowed there: at most {have}")
        left = sum(sizes) - need * len(sizes)
        if split == "random_planetoid" and left < RANDOM_PLANETOID_REST:
            raise config.ConfigError(f"{where}: {need} in {cell} leaves {left} of {cell.dataset}'s nodes outside the "
                                     f"training set; the split needs {RANDOM_PLANETOID_REST}")


def where_set(params: dict, cell: config.Cell, key: str) -> str:
    """The params.yaml key that gave ``cell`` its value of ``key``: its study's grid or
    settings, or else the method's or the dataset's own settings."""
    if key in dict(cell.setting):
        return f"studies.{cell.study}.grid.{key}"
    if key in (params["studies"][cell.study].get("settings") or {}):
        return f"studies.{cell.study}.settings.{key}"
    return f"{key} of {cell.dataset}'s settings for {cell.method} (study {cell.study})"


def check_nothing_emptied(params: dict, eval_root: Path = EVAL_ROOT) -> None:
    """Refuse a selection that would leave a trained cell of a selected family with no seeds: its
    runs set to 0, or the cell gone from its study (or the study gone). Train would rewrite its
    tables empty or remove them, and DVC delete the figures before the plot stage found out;
    dropping results on purpose is deleting their table first."""
    cells = {(cell.dataset, cell.method, cell.name): cell for cell in config.cells(params)}
    for dataset in params["datasets"]:
        for method in params["methods"]:
            for name in cells_with_tables(dataset, method, eval_root):
                table = table_paths(dataset, method, name, eval_root)["per_seed"]
                seeds = len(table.read_text().splitlines()) - 1 if table.exists() else 0
                if seeds < 1:
                    continue
                cell = cells.get((dataset, method, name))
                keep = f"{table} holds {seeds} seeds; to drop them, delete that table first"
                if cell is None:
                    study = name.split("-")[0]  # a cell's name is its study's, then its grid values
                    gone = (f"studies.{study}: removed" if study not in params["studies"] else
                            f"studies.{study}: no longer holds {dataset}/{method}/{name}")
                    raise config.ConfigError(f"{gone}, but {keep}")
                if config.runs_for(params, cell) == 0:
                    raise config.ConfigError(f"{config.runs_key(params, cell)}: 0 for {cell}, but {keep}")


def write_specs(params: dict, root: Path = SPECS_ROOT) -> list[str]:
    """Each family's specs and index, rewritten only where they changed (a file of a cell that
    left the family is removed); one line per cell whose spec is new or moved or that left,
    saying what moved (the families whose stages `dvc repro` will rerun)."""
    lines = []
    for dataset in params["datasets"]:
        for method in params["methods"]:
            cells = config.family(params, dataset, method)
            for cell in cells:
                path = spec_file(dataset, method, cell.name, root)
                text = spec_text(cell_spec(params, cell))
                old = path.read_text() if path.exists() else None
                if old == text:
                    continue
                try:
                    moved = "new cell" if old is None else "; ".join(differences(json.loads(old), json.loads(text)))
                except json.JSONDecodeError:
                    moved = "its old file was not a spec"
                lines.append(f"  {cell}: {moved}")
                write_text_atomic(path, text)
            names = {f"{cell.name}.json" for cell in cells} | {INDEX_NAME}
            for path in sorted(family_dir(dataset, method, root).glob("*.json")):
                if path.name not in names:
                    lines.append(f"  {dataset}/{method}/{path.stem}: no longer a cell of the studies")
                    path.unlink()
            index = json.dumps([cell.name for cell in cells], indent=1) + "\n"
            path = index_file(dataset, method, root)
            if not path.exists() or path.read_text() != index:
                write_text_atomic(path, index)
    return lines


def main(argv: list[str]) -> None:
    config.no_args(argv, "check")
    params = config.load_params()
    config.check_everything(params)
    check_memory_budget(params)
    check_splits_fit(params)
    check_nothing_emptied(params)
    device = resolve_device_name(params.get("device", "auto"))
    moved = write_specs(params)
    print("\n".join([f"{len(moved)} cells' specs moved; dvc repro reruns their families' stages:" if moved else
                      "no cell's spec moved", *moved]), file=sys.stderr)
    print("\n".join(plan_lines(params, device)), file=sys.stderr)
    CHECKED_FILE.parent.mkdir(parents=True, exist_ok=True)
    CHECKED_FILE.write_text(f"{PARAMS_FILE}: valid\n")


if __name__ == "__main__":
    config.run_main(main)
