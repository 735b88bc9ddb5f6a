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
from pipeline.engine.device import resolve_device_name
from pipeline.engine.memory import peak_bytes_of, sizes_from_counts  # the train stage's own estimate
from pipeline.files import read_record, write_text_atomic
from pipeline.paths import (CHECKED_FILE, DATA_STATS_ROOT, EVAL_ROOT, PARAMS_FILE, SPECS_ROOT, STASH_ROOT,
                            class_counts_file, run_dir, seed_file)
from pipeline.report.tables import read_written, table_paths, tables_hold
from pipeline.progress import duration
from pipeline.engine.spec import (INDEX_NAME, cell_name, cell_spec, differences, family_dir, family_twins,
                                  index_file, seed_identity, spec_file, spec_text)


def plan_lines(params: dict, device: str, moved: dict[str, str]) -> list[str]:
    """What `dvc repro` trains now, first: the cells whose committed tables were not written
    under their spec (``moved``: :func:`write_specs`'s answer, what moved in a cell's spec),
    their seeds and time. Then what the whole selection would cost from scratch, per
    study, labelled as such. A spec back to the one its tables were written from trains nothing
    and is not listed. Cells that the train stage batches as replicas of one batch are costed
    together: their chunks run ``chunk_workers`` at a time whichever cell's seeds they hold."""
    memory = plan.machine_memory_bytes() if device == "cpu" else None
    baselines = config.baseline_methods(params)
    studies: dict[str, list] = {}  # study -> [cells, seconds from scratch, cells without a figure, cells not run]
    written: dict[tuple[str, str], dict] = {}
    twins: dict[tuple[str, str], dict] = {}  # a family that trains now -> its cells' twins
    rows = []  # (cell, runs, spec, measured, seeds to train now or None, the cell's replica batch)
    batch_seeds: dict = {}  # replica batch -> [its seeds from scratch, its seeds to train now]
    for cell in config.cells(params):
        runs = config.runs_for(params, cell)
        study = studies.setdefault(cell.study, [0, 0.0, 0, []])
        if runs == 0:
            study[3].append(cell)
            continue
        spec = cell_spec(params, cell)  # in memory: its grid values in the grid's order, which name the cell
        family = (cell.dataset, cell.method)
        if family not in written:
            written[family] = read_written(*family)
        to_train = None
        if not tables_hold(cell.dataset, cell.method, spec, written[family]):
            if family not in twins:
                twins[family] = family_twins(params, *family)
            to_train = runs - seeds_found(spec, [cell_spec(params, twin) for twin in twins[family][cell]])
        batch = (family, replica_batch(params, cell, spec))
        rows.append((cell, runs, spec, plan.cell_measured(params, cell, device, baselines), to_train, batch))
        seeds = batch_seeds.setdefault(batch, [0, 0])
        seeds[0] += runs
        seeds[1] += to_train or 0
    now, back, training, seeds_now, seconds_now, unknown_now, elsewhere = [], 0, 0, 0, 0.0, 0, 0
    for cell, runs, spec, measured, to_train, batch in rows:
        dataset, method, study = cell.dataset, cell.method, studies[cell.study]
        study[0] += 1
        if measured is None:
            study[2] += 1
        else:
            side_by_side = cell_side_by_side(params, cell, spec["engine"], batch_seeds[batch][0], device)
            study[1] += measured[0] * runs / plan.seeds_at_once(runs, side_by_side)
            elsewhere += plan.OTHER_MACHINE in measured[1]
        if to_train is None:
            back += str(cell) in moved
            continue
        found = runs - to_train
        side_by_side = cell_side_by_side(params, cell, spec["engine"], batch_seeds[batch][1], device)
        training, seeds_now = training + 1, seeds_now + to_train
        now.append(f"  {cell}: {runs} seeds" + (f" ({found} found trained)" if found else "") + ", "
                   + plan.estimate(dataset, method, to_train, measured=measured, side_by_side=side_by_side)
                   + f"; {moved.get(str(cell), 'its tables were not written under this spec')}")
        warning = plan.memory_warning(dataset, method, memory, hp=config.cell_hparams(params, cell))
        if warning:
            now.append(f"    {warning}")
        if measured is None and to_train:
            unknown_now += 1
        elif measured is not None:
            seconds_now += measured[0] * to_train / plan.seeds_at_once(to_train, side_by_side)
    if training:
        lines = [f"`dvc repro` trains {training} cells on {device} now (their tables were not written under their "
                 f"spec): {seeds_now} seeds to train, ~{duration(seconds_now)} at the committed run's speed"
                 + (f", plus {unknown_now} cells without a measured figure" if unknown_now else "") + ":", *now]
    else:
        lines = ["`dvc repro` trains nothing now: every cell's tables were written under its spec"]
    if back:
        lines.append(f"{back} cells' specs are back to those their tables were written from: nothing to train for them")
    total = sum(study[1] for study in studies.values())
    lines.append(f"the whole selection, for reference: {sum(s[0] for s in studies.values())} cells, ~{duration(total)} "
                 f"if each trained from scratch at the committed run's speed"
                 + (f" ({elsewhere} cells of it from another kind of machine's figures)" if elsewhere else "") + ":")
    for name, (count, seconds, unknown, unrun) in studies.items():
        parts = [f"{count} cells" + (f", ~{duration(seconds)}" if count > unknown else "")
                 + (f" ({unknown} without a measured figure)" if unknown else "")] if count else []
        if unrun:  # a study's unrun cells in one line: the paper's studies have hundreds
            parts.append(f"{len(unrun)} cells not run (runs 0): {', '.join(map(str, unrun[:3]))}"
                         + (", ..." if len(unrun) > 3 else ""))
        lines.append(f"  {name}: {'; '.join(parts)}")
    return lines


def replica_batch(params: dict, cell: config.Cell, spec: dict) -> tuple:
    """Which of its family's cells the train stage batches ``cell`` with, as replicas
    (:func:`pipeline.engine.cells.replica_key`): cells of one family with the same key."""
    from pipeline.engine.cells import features_rule, replica_key  # torch: loaded by cell_spec already

    hp = config.cell_hparams(params, cell)
    key = replica_key(spec, hp, features_rule(params, cell.dataset, hp))
    return ("alone", str(cell)) if key is None else key


def cell_side_by_side(params: dict, cell: config.Cell, engine_kind: str, runs: int, device: str,
                      data_root: Path = DATA_STATS_ROOT) -> int:
    """How many of a cell's seeds or chunks the train stage runs at once on this machine: the
    single engine's ``n_jobs`` workers, or the batched engine's ``chunk_workers``, no more than
    the ``runs`` seeds of the cell's batch (its own, or its replica batch's) make chunks (of
    ``seed_chunk`` seeds) and their estimated peaks fit the budget
    (:func:`sizes_without_features`; not yet preprocessed: the budget is not counted)."""
    if engine_kind == "single" or device != "cpu":
        return plan.workers_side_by_side(engine_kind == "single", device, params.get("n_jobs", -1))
    from pipeline.engine.cells import chunk_cap  # torch: loaded by cell_spec already

    hp = config.cell_hparams(params, cell)
    seeds = max(1, chunk_cap(hp, params, runs))
    sizes = sizes_without_features(cell.dataset, hp, data_root)
    peak = 0 if sizes is None else peak_bytes_of(sizes, hp, seeds)
    workers = plan.chunk_workers(device, params.get("chunk_workers", 1), peak,
                                 params.get("memory_budget_gb", 6) * 2**30)
    return max(1, min(workers, -(-runs // seeds)))


def seeds_found(spec: dict, twins: list[dict] = ()) -> int:
    """Of a cell's seeds, about how many train will find trained under ``spec``, for the
    estimate: those in its folder of data/runs where the folder's first seed file was made under
    the spec's identity (train keeps a folder to one identity), those of the others in the
    stash under it, and those of its twin cells' folders (``twins``: their specs, whose seeds
    the seed store copies). Train itself reads every file."""
    from pipeline.engine.store import twin_cells  # torch: loaded by cell_spec already

    dataset, method, runs = spec["dataset"], spec["method"], spec["runs"]
    folder, identities = run_dir(dataset, method, cell_name(spec)), identities_of(spec)
    first = next(iter(sorted(folder.glob("seed_*.pt"))), None)
    found = set()
    if first is not None and (read_record(first) or {}).get("fingerprint") in identities:
        found = {seed for seed in range(runs) if seed_file(folder, seed).exists()}
    for identity in identities:
        stash = STASH_ROOT / dataset / method / identity
        found |= {seed for seed in range(runs) if seed_file(stash, seed).exists()} if stash.is_dir() else set()
    if twins and folder.parent.is_dir():
        lenders = set().union(*(identities_of(twin) for twin in twins))
        for other in twin_cells(folder, lenders):
            found |= {seed for seed in range(runs) if seed_file(other, seed).exists()}
    return len(found)


def identities_of(spec: dict) -> set[str]:
    """The identities a seed of ``spec`` may carry: a seed whose numbers depend on its chunk
    records the chunk's size, which needs the graph; any size up to the cap will do here."""
    chunks = [None] if "chunking" not in spec else range(1, spec["chunking"]["seed_chunk"] + 1)
    return {seed_identity(spec, chunk) for chunk in chunks}


def sizes_without_features(dataset: str, hp: dict, data_root: Path = DATA_STATS_ROOT) -> dict | None:
    """The memory estimate's sizes from reports/data's counts of ``dataset``, its features taken
    as empty (the counts do not hold their non-zeros): a lower bound of the train stage's
    estimate. None where the dataset is not yet preprocessed."""
    path = data_root / f"{dataset}.json"
    counts = json.loads(path.read_text()) if path.exists() else {}
    if not {"nodes", "directed_edges", "features", "classes"} <= set(counts):
        return None
    return sizes_from_counts(hp, nodes=counts["nodes"], directed_edges=counts["directed_edges"],
                             features=counts["features"], feature_nnz=0, classes=counts["classes"])


def check_memory_budget(params: dict, data_root: Path = DATA_STATS_ROOT) -> None:
    """Refuse a ``memory_budget_gb`` below one seed of a trained cell, which every train stage
    would refuse later. From the graph's counts in reports/data (features taken as empty: a
    lower bound of the train stage's estimate); a dataset not yet preprocessed is skipped."""
    budget = params.get("memory_budget_gb", 6)
    for cell in config.trained_cells(params):
        hp = config.cell_hparams(params, cell)
        sizes = sizes_without_features(cell.dataset, hp, data_root)
        if sizes is None:
            continue
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
    """Refuse runs of 0 for a cell whose committed table holds seeds: train would rewrite its
    tables empty, and DVC delete the figures before the plot stage found out. A cell that leaves
    the studies (its study, dataset or method dropped from a block: "no aggregation study") is
    another matter: its tables leave with it and the reports say it is not run."""
    for cell in config.cells(params):
        if config.runs_for(params, cell) > 0:
            continue
        table = table_paths(cell.dataset, cell.method, cell.name, eval_root)["per_seed"]
        seeds = len(table.read_text().splitlines()) - 1 if table.exists() else 0
        if seeds > 0:
            raise config.ConfigError(f"{config.runs_key(params, cell)}: 0 for {cell}, but {table} holds {seeds} seeds, "
                                     f"which train would drop; to drop them, delete that table first")


def write_specs(params: dict, root: Path = SPECS_ROOT) -> tuple[dict[str, str], list[str]]:
    """Each family's specs and index, rewritten only where they changed (a file of a cell that
    left the family is removed). Returns what moved in each cell whose spec is new or moved, and
    a line per cell that left the studies."""
    moved, left = {}, []
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
                    moved[str(cell)] = "new cell" if old is None else "; ".join(differences(json.loads(old), json.loads(text)))
                except json.JSONDecodeError:
                    moved[str(cell)] = "its old file was not a spec"
                write_text_atomic(path, text)
            names = {f"{cell.name}.json" for cell in cells} | {INDEX_NAME}
            for path in sorted(family_dir(dataset, method, root).glob("*.json")):
                if path.name not in names:
                    left.append(f"  {dataset}/{method}/{path.stem}: no longer a cell of the studies")
                    path.unlink()
            index = json.dumps([cell.name for cell in cells], indent=1) + "\n"
            path = index_file(dataset, method, root)
            if not path.exists() or path.read_text() != index:
                write_text_atomic(path, index)
    return moved, left


def validate(params: dict) -> None:
    """Every check of params.yaml, before anything is written: the values (each against its rule
    and its method's schema), the splits the datasets' classes must hold, the memory budget, and
    no trained cell emptied. None of it loads torch, so a bad value is named in a second or two."""
    config.check_everything(params)
    check_splits_fit(params)
    check_memory_budget(params)
    check_nothing_emptied(params)


def main(argv: list[str]) -> None:
    config.no_args(argv, "check")
    params = config.load_params()
    validate(params)
    device = resolve_device_name(params.get("device", "auto"))
    moved, left = write_specs(params)
    lines = plan_lines(params, device, moved)
    if left:
        lines += [f"{len(left)} cells left the studies (their seed files stay):", *left]
    print("\n".join(lines), file=sys.stderr)
    CHECKED_FILE.parent.mkdir(parents=True, exist_ok=True)
    CHECKED_FILE.write_text(f"{PARAMS_FILE}: valid\n")


if __name__ == "__main__":
    config.run_main(main)
