"""A cell's spec: everything its numbers depend on, written by the check stage, read by train.

A cell is one study's (dataset, method) at one point of its grid (:class:`pipeline.config.Cell`).
Its spec, ``data/specs/<dataset>/<method>/<cell>.json``, holds its resolved settings (the
dataset's row of CAD-Net's table, the global overrides, what the method's registry entry fixes,
its own keys and the study's grid values), its number of seeds, how its seeds are batched
where that changes their numbers, the raw files its graph is built from, and the *versions* of
the code its numbers come from. The train and evaluate stages of the cell's
(dataset, method) family depend on the family's folder of specs and on one committed output of
the stage before them, on nothing else of params.yaml or of the code, so the specs are the one
judge of what is stale: DVC reruns a family exactly when one of its specs changed, train
retrains a cell only where its spec is not the one its tables were written from
(:func:`spec_hash`), and a seed file is reused exactly when it was trained under the same spec
(:func:`seed_identity`; the number of seeds, the study's name aside).

Code identity is a version, not a hash of source files: moving a function to another module,
renaming a module or rewording a docstring leaves every version, and so every spec and every
trained seed, as it was. A change that makes a piece of code compute other numbers must bump
that piece's version: its method's ``version`` in the registry (:mod:`pipeline.models.registry`) for
its network, or the shared component's in :data:`COMPONENTS`. ``tests/test_spec.py`` trains
every method on a tiny graph and fails when its numbers move while its versions did not.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path

from pipeline import config
from pipeline.download import files_for
from pipeline.paths import SPECS_ROOT

# The shared code behind every cell's numbers, each with the version of what it computes.
COMPONENTS = {
    # pipeline.train's loop: Adam/SGD and the lr schedule, one step and one eval pass per
    # epoch, early stopping, model selection, the per-seed loss and accuracy of pipeline.models.seeds
    "loop": 1,
    "splits": 1,  # pipeline.engine.splits: which nodes train, validate and test for each seed
    "graph": 1,  # pipeline.preprocess: graph.pt (edges, self-loops, features) from the raw files
    # pipeline.preprocess.sparse_features: a cell's own feature normalisation (features_rule)
    "features": 1,
}
# The layout of what the train stage writes from the seeds (per-seed table, gamma histogram,
# per-epoch summary) and of the summary evaluate writes from the table: a new layout reruns
# both stages of every cell but keeps every trained seed.
TABLES_VERSION = 1


def family_dir(dataset: str, method: str, root: Path = SPECS_ROOT) -> Path:
    return root / dataset / method


def check_family(dataset: str, method: str, root: Path = SPECS_ROOT) -> None:
    """``method`` names one of the families the check stage wrote specs for on ``dataset``: the
    registry's check for a stage that loads no network code (evaluate)."""
    if not family_dir(dataset, method, root).is_dir():
        written = sorted(p.name for p in (root / dataset).iterdir() if p.is_dir()) if (root / dataset).is_dir() else []
        raise config.ConfigError(f"method: unknown value {method!r}; allowed values: "
                                 f"{', '.join(written) or f'none in {root / dataset} yet (run `dvc repro check` first)'}")


def spec_file(dataset: str, method: str, name: str, root: Path = SPECS_ROOT) -> Path:
    return family_dir(dataset, method, root) / f"{name}.json"


def index_file(dataset: str, method: str, root: Path = SPECS_ROOT) -> Path:
    """The family's cells, in table order; written for a family without cells too, so that its
    folder exists in every clone (git keeps no empty folder)."""
    return family_dir(dataset, method, root) / INDEX_NAME


INDEX_NAME = "_cells.json"  # no study is named so (config.STUDY_NAME)


def engine_of(params: dict, method: str, settings: dict) -> str:
    """``batched`` or ``single``: a method without a batched form (in the implementation its
    ``settings`` select) trains seed by seed."""
    batched = config.registry()[method].batched_for(settings)
    return "batched" if params.get("engine", "batched") == "batched" and batched else "single"


def cell_spec(params: dict, cell: config.Cell) -> dict:
    """The spec of one cell from a checked params.yaml."""
    entry = config.registry()[cell.method]
    settings = config.cell_hparams(params, cell)
    chunk_cap = settings.pop("seed_chunk", params.get("seed_chunk", "auto"))  # how, not what, unless below
    engine = engine_of(params, cell.method, settings)
    spec = {
        "study": cell.study,
        "dataset": cell.dataset,
        "method": cell.method,
        "setting": dict(cell.setting),
        "runs": config.runs_for(params, cell),
        "settings": settings,
        "engine": engine,
        "code": {**COMPONENTS, "network": entry.version_for(settings)},
        "tables": TABLES_VERSION,
        # graph.pt: the raw files and the settings preprocess builds it with
        "data": {"raw_sha256": [row["sha256"] for row in files_for(cell.dataset)],
                 "graph_settings": {key: config.hparams_for(params, cell.dataset)[key]
                                    for key in ("self_loops", "normalize_features")}},
    }
    if engine == "batched" and not entry.independent_of_chunk(settings):
        # its seeds share their chunk's dropout stream: the chunk's size is part of their numbers
        spec["chunking"] = {"seed_chunk": chunk_cap, "memory_budget_gb": params.get("memory_budget_gb", 6)}
    return spec


def spec_text(spec: dict) -> str:
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"


def read_spec(dataset: str, method: str, name: str, root: Path = SPECS_ROOT) -> dict:
    return _read_json(spec_file(dataset, method, name, root))


def read_index(dataset: str, method: str, root: Path = SPECS_ROOT) -> list[str]:
    """The names of the family's cells, as the check stage wrote them."""
    return _read_json(index_file(dataset, method, root))


def _read_json(path: Path):
    if not path.exists():
        raise config.DataError(f"{path}: missing; run `dvc repro check` (or `python -m pipeline.check`) first")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise config.DataError(f"{path}: not a spec the check stage wrote; run `dvc repro check`") from None


def current_family(params: dict, dataset: str, method: str) -> list[dict]:
    """The specs of the family's cells from params.yaml, which must be the ones the check stage
    wrote: a stage run by hand after params.yaml changed says so rather than training under
    stale settings."""
    cells = config.family(params, dataset, method)
    stale = (f"{index_file(dataset, method)}: written for other settings than params.yaml's; "
             f"run `dvc repro check` (or `python -m pipeline.check`) first")
    if read_index(dataset, method) != [cell.name for cell in cells]:
        raise config.ConfigError(stale)
    specs = []
    for cell in cells:
        spec = cell_spec(params, cell)
        if read_spec(dataset, method, cell.name) != json.loads(spec_text(spec)):
            raise config.ConfigError(stale.replace(str(index_file(dataset, method)), str(spec_file(dataset, method, cell.name))))
        specs.append(spec)
    return specs


def cell_of(spec: dict) -> config.Cell:
    return config.Cell(spec["study"], spec["dataset"], spec["method"], tuple(spec["setting"].items()))


def cell_name(spec: dict) -> str:
    return cell_of(spec).name


def spec_hash(spec: dict) -> str:
    """The whole spec's: what a cell's committed tables record they were written from."""
    return config.fingerprint(spec)


def differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    """What moved between two specs, one ``key: old -> new`` per leaf (dotted keys)."""
    moved = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if isinstance(before, dict) and isinstance(after, dict):
            moved += differences(before, after, f"{prefix}{key}.")
        elif before != after:
            moved.append(f"{prefix}{key}: {before!r} -> {after!r}" if key != "raw_sha256" else f"{prefix}{key}")
    return moved


def seed_identity(spec: dict, chunk: int | None = None) -> str:
    """What a stored seed must match to be reused: its cell's spec without the number of seeds,
    the tables' layout and the study's name (its grid values are in the settings), and, where
    the chunk changes its numbers, the chunk it trained in."""
    kept = {key: value for key, value in spec.items() if key not in ("study", "setting", "runs", "tables", "chunking")}
    if "chunking" in spec:
        kept["chunk"] = chunk
    return config.fingerprint(kept)


def experiment(params: dict, cell: config.Cell) -> str:
    """What a cell computes, whichever study holds it: its spec without the study, the number of
    seeds, the tables' layout and the chunk, its settings with the method's defaults filled in.
    Two cells of one experiment are the same network, settings and split (Cora's GAT at range 2
    is Table 2's GAT, which leaves its two layers to the default)."""
    spec = cell_spec(params, cell)
    schema = config.registry()[cell.method].settings  # None: a method of the protocol's keys only
    defaults = {f.name: f.default for f in fields(schema) if f.default is not MISSING} if schema else {}
    kept = {key: value for key, value in spec.items() if key not in ("study", "setting", "runs", "tables", "chunking")}
    return config.fingerprint({**kept, "settings": {**defaults, **spec["settings"]}})


def cells_by_experiment(params: dict, cells: list[config.Cell]) -> dict[str, list[config.Cell]]:
    """``cells`` grouped by what they compute (:func:`experiment`), in their order: the cells of
    one group are one network, settings and split, whichever studies hold them."""
    groups: dict[str, list[config.Cell]] = {}
    for cell in cells:
        groups.setdefault(experiment(params, cell), []).append(cell)
    return groups


def family_twins(params: dict, dataset: str, method: str) -> dict[config.Cell, list[config.Cell]]:
    """Each cell of the (dataset, method) family with its family's other cells of the same
    experiment: PubMed's GAT at range 2 with Table 2's GAT. One pass over the family, so that a
    stage that prepares the family's cells computes each cell's experiment once."""
    return {cell: [other for other in group if other != cell]
            for group in cells_by_experiment(params, config.family(params, dataset, method)).values() for cell in group}
