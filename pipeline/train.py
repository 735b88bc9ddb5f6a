"""Train stage: ``python -m pipeline.train <dataset> [<method>]``: trains a (dataset, method)
family's cells through the one training loop (:mod:`pipeline.engine.loop`).

Trains seeds ``0 .. runs-1`` of each cell and writes what the later stages read, in
``reports/eval/<dataset>/<method>/`` (committed, so that every stage after this one reruns on
any clone): ``<cell>.csv`` (one row per seed), ``<cell>_gamma.csv`` (histogram of the adaptive
weights gamma over nodes at each seed's selected epoch) and ``<cell>_epochs.csv`` (per epoch:
how many seeds still run, and the mean and 10-90% spread of their losses).

It is three jobs, one module each: preparing a cell (:mod:`pipeline.engine.cells`: settings,
graph, chunk size, identity, checked before any seed file is touched), the seed store
(:mod:`pipeline.engine.store`: finished seeds reused, stashed, copied from a twin cell, the
family locked) and dispatch (:mod:`pipeline.engine.dispatch`: the chunks on this machine, or on
a Dask cluster named by ``CADNET_CLUSTER``). This module runs them in that order and writes the
tables.
"""
from __future__ import annotations

import sys
import time

from pipeline import config, progress
from pipeline.engine import dispatch, plan
from pipeline.engine.cells import PreparedCell, chunk_size, fixed_blocks, group_measured, prepare_cell, replica_groups
from pipeline.engine.device import is_out_of_memory, resolve_device_name
from pipeline.engine.loop import Replica, TrainingError
from pipeline.engine.spec import cell_name, current_family, family_twins
from pipeline.engine.store import family_lock, has_seed_files, load_records, order_seeds
from pipeline.files import save_torch, write_csv_atomic, write_text_atomic
from pipeline.paths import seed_file
from pipeline.report.tables import (epoch_summary, family_tables, gamma_histogram, per_seed_table, read_written,
                                    table_paths, tables_hold, write_written, written_record)


def main(argv: list[str]) -> None:
    if not argv:
        raise config.ConfigError("usage: python -m pipeline.train <dataset> [<method>]")
    dataset, method = config.cell_args(argv, "train")
    params = config.load_params()
    resolve_device_name(params.get("device", "auto"))  # `cuda` without one stops here
    specs = current_family(params, dataset, method)
    written = read_written(dataset, method)
    kept = [spec for spec in specs if tables_hold(dataset, method, spec, written)]
    if kept:
        print(f"train {dataset}/{method}: {len(kept)} of its {len(specs)} cells' tables were written "
              f"under their spec already; kept", file=sys.stderr)
    # every check that can fail comes before any seed file is touched
    graphs: dict = {}
    twins = family_twins(params, dataset, method)
    prepared = [prepare_cell(params, spec, graphs, twins) for spec in specs if spec not in kept]
    # a kept cell's seed files are put in order too (its spec's in data/runs, others' in the
    # stash), so that data/runs holds the seeds of the committed tables; none there, none to order
    ordered = [prepare_cell(params, spec, graphs, twins, check=False) for spec in kept] \
        if has_seed_files(dataset, method) else []
    with family_lock(dataset, method, f"{dataset}/{method}"), dispatch.engine(params) as engine:
        for cell in ordered:
            order_seeds(cell.spec, cell.fingerprint, cell.run_dir, cell.twins)
        for group in replica_groups(prepared):
            train_pending(params, group, engine)
            for cell in group:
                records = load_records(cell.run_dir, dataset, method, cell.spec["runs"], cell.fingerprint)
                write_tables(dataset, method, cell.name, records)
                written[cell.name] = written_record(dataset, method, cell.spec)
                write_written(dataset, method, written)
        forget_other_cells(dataset, method, [cell_name(spec) for spec in specs], written)


def plan_chunks(cells: list[PreparedCell], pending: list[tuple[PreparedCell, int]], size: int):
    """The chunks that train the ``pending`` (cell, seed) pairs, and for each chunk the cells its
    records belong to, in order. A method whose seeds share their chunk's dropout stream trains
    whole fixed blocks (of its one cell), of which only the pending seeds are kept."""
    first = cells[0]
    spec, method = first.spec, first.spec["method"]
    if "chunking" in spec:
        blocks = fixed_blocks([seed for _, seed in pending], size, spec["runs"])
        return ([dispatch.Chunk(method, [Replica(first.hp, s) for s in block], True) for block in blocks],
                [[first] * len(block) for block in blocks])
    if spec["engine"] == "batched":
        parts = [pending[k:k + size] for k in range(0, len(pending), size)]
        return ([dispatch.Chunk(method, [Replica(c.hp, s) for c, s in part], True) for part in parts],
                [[c for c, _ in part] for part in parts])
    return [dispatch.Chunk(method, [Replica(c.hp, s)], False) for c, s in pending], [[c] for c, _ in pending]


def train_pending(params: dict, cells: list[PreparedCell], engine, stop_at: float | None = None) -> bool:
    """Train the seeds that the cache of each of ``cells`` (one of :func:`replica_groups`) lacks,
    side by side as replicas of one batch, through ``engine``, each saved as it comes back. With
    ``stop_at`` (a ``time.monotonic()`` time), no chunk starts that the measured figure says
    would end after it; whether every seed was trained."""
    first = cells[0]
    spec, hp, graph, size = first.spec, first.hp, first.graph, first.size
    dataset, method, engine_kind = spec["dataset"], spec["method"], spec["engine"]
    device = resolve_device_name(params.get("device", "auto"))
    names = first.name if len(cells) == 1 else f"{len(cells)} cells as one batch ({cells[0].name} .. {cells[-1].name})"
    where = f"{dataset}/{method}/{names}"
    pending = [(cell, seed) for cell in cells for seed in order_seeds(cell.spec, cell.fingerprint, cell.run_dir, cell.twins)]
    runs = sum(cell.spec["runs"] for cell in cells)
    if len(cells) > 1:  # the batch's chunks hold replicas of any of its cells
        size = chunk_size(graph, hp, params, len(pending))
    how = f"chunks of up to {size}" if engine_kind == "batched" else "one at a time"
    on = device if isinstance(engine, dispatch.LocalEngine) else engine.name
    chunks, owners = plan_chunks(cells, pending, size)
    if isinstance(engine, dispatch.LocalEngine) and chunks:  # seeds or chunks in worker processes
        side_by_side = engine.workers(chunks, graph, device)
    else:
        side_by_side = plan.workers_side_by_side(engine_kind == "single", device, params.get("n_jobs", -1))
    how += f", {side_by_side} at a time" if engine_kind == "batched" and side_by_side > 1 else ""
    measured = group_measured(params, cells, device)
    estimate = plan.estimate(dataset, method, len(pending), measured=measured, side_by_side=side_by_side)
    print(f"train {where}: {runs} seeds, {runs - len(pending)} reused, {len(pending)} to train "
          f"({engine_kind}, {how}, {on}); {estimate}", file=sys.stderr)
    if not pending:
        return True
    wanted = {(cell.name, seed) for cell, seed in pending}
    # the figure is a seed's time in the process that trained it, so a chunk takes that times its
    # seeds wherever it runs, side by side with others or not
    per_seed = measured[0] if measured else 0.0

    def may_start(chunk: dispatch.Chunk) -> bool:
        return stop_at is None or time.monotonic() + per_seed * len(chunk.replicas) <= stop_at

    bar = progress.outer(len(pending), f"train {where}", "seeds")
    left = len(pending)
    try:
        for index, records in engine.run(chunks, graph, (dataset, first.rule), params.get("device", "auto"), may_start):
            kept = [(cell, r) for cell, r in zip(owners[index], records) if (cell.name, r["seed"]) in wanted]
            for cell, record in kept:
                record.update(fingerprint=cell.fingerprint, dataset=dataset, method=method)
                save_torch(record, seed_file(cell.run_dir, record["seed"]))
            bar.set_postfix(last_acc=f"{100 * kept[-1][1]['test_acc']:.1f}")
            bar.update(len(kept))
            left -= len(kept)
    except TrainingError as err:
        raise TrainingError(f"{where}: {err}") from None
    except Exception as err:
        if not is_out_of_memory(err):
            raise
        raise TrainingError(f"{where}: out of memory on {device} with chunks of {size} seeds "
                            f"({str(err).splitlines()[0][:120]}); lower seed_chunk or memory_budget_gb") from None
    finally:
        bar.close()
    return left == 0


def write_tables(dataset: str, method: str, name: str, records: list[dict]) -> None:
    """The cell's committed tables, each whole or not at all, the per-seed table last (its
    rows are what stats reads; the others describe them)."""
    paths = table_paths(dataset, method, name)
    if not records:  # runs 0: the cell is in the DVC matrix but not run; its tables say so
        write_text_atomic(paths["gamma"], "")
        write_text_atomic(paths["epochs"], "")
    else:
        write_csv_atomic(paths["gamma"], gamma_histogram(records), index=False, float_format="%.6g")
        write_csv_atomic(paths["epochs"], epoch_summary(records), index=False, float_format="%.6g")
    write_csv_atomic(paths["per_seed"], per_seed_table(records), index=False, float_format="%.6g")


def forget_other_cells(dataset: str, method: str, names: list[str], written: dict[str, str]) -> None:
    """The family's folder holds the tables of its cells only: a cell that left the studies
    (its seeds stay in data/runs) leaves it, and the record of what was written says so."""
    folder = family_tables(dataset, method)
    folder.mkdir(parents=True, exist_ok=True)
    keep = {path for name in names for path in table_paths(dataset, method, name).values()}
    for path in folder.glob("*.csv"):
        if path not in keep:
            path.unlink()
    write_written(dataset, method, {name: written[name] for name in names if name in written})


if __name__ == "__main__":
    # Run main() from the imported module, not __main__, so that joblib's worker processes
    # can find their functions by module path.
    from pipeline import train

    config.run_main(train.main, kept="every seed file finished before it is kept (`dvc repro` trains only the others)")
