"""The queue for a lent machine: ``python -m pipeline.queue [--runs N] [--deadline 9m]
[--only PATTERN ...] [--dry-run] [--pack FILE]``.

Trains, in priority order, the seeds that the cells of ``params.yaml`` lack to reach ``--runs``
seeds each (default: the paper's 100):

1. Tables 2 and 3's cells (the studies ``main``, ``variants``, ``baselines``);
2. each study's CAD-Net row;
3. the rivals that the paper's study claims name (:data:`CLAIM_RIVALS`);
4. every other cell;

within a tier the cheapest first, so that the most cells finish. A cell's cost is its seeds to
go times a seed's cost on this kind of device (:func:`pipeline.engine.plan.cell_measured`): its
own committed seeds' where it has some, else its family's, scaled up for a longer range or a
wider hidden layer, over the chunks that train side by side (``chunk_workers``, or the single
engine's ``n_jobs``). The train loop keeps the deadline with the same figure.

It trains as the train stage does (each family's cells in replica batches,
:func:`pipeline.engine.cells.replica_groups`; every seed file saved as it finishes, under its cell's
identity), but writes no table and leaves ``params.yaml`` alone: raise those cells' ``runs``
and ``dvc repro`` adopts the seeds and trains none. At ``--deadline`` (counted from the start)
it starts no chunk that its estimate says would not end in time; run it again and it goes on
where it stopped. ``--only`` keeps the cells whose ``dataset/method/cell`` name matches one of
its shell-style patterns (``'pubmed/cadnet/beta-*'``, ``'cora/*/ranges-*'``), in the same order.
``--pack FILE`` writes the seed files of every cell it planned into one tar,
for the trip back (``tar xf FILE`` in the other checkout). ``--dry-run`` prints the plan only.
"""
from __future__ import annotations

import argparse
import fnmatch
import re
import sys
import tarfile
import time
from pathlib import Path
from typing import NamedTuple

from pipeline import config
from pipeline.check import cell_side_by_side, replica_batch
from pipeline.engine import plan
from pipeline.engine.device import resolve_device_name
from pipeline.engine.spec import cell_spec, cells_by_experiment, family_twins
from pipeline.paths import run_dir, seed_file
from pipeline.progress import duration

# The methods whose study cells the paper's claims compare CAD-Net with: APPNP and GCN
# (Figure 1), and the best rivals of Figures 2-3 and Table 4 (GAT, GDC, SGC).
CLAIM_RIVALS = ("appnp", "gcn", "gat", "gdc", "sgc")
TIERS = ("Tables 2-3", "CAD-Net's study rows", "the claims' rivals", "the rest")


class Job(NamedTuple):
    """A cell of the queue: what it lacks and what that costs here."""
    cell: config.Cell
    tier: int
    have: int  # seed files present (by name; the train loop checks each one's identity)
    to_go: int
    seconds: float | None  # estimated, None where no figure is measured


def tier_of(cell: config.Cell) -> int:
    if cell.study in config.TABLE_STUDIES:
        return 0
    if cell.method == "cadnet":
        return 1
    return 2 if cell.method in CLAIM_RIVALS else 3


def seeds_present(cell: config.Cell, runs: int) -> int:
    return sum(seed_file(run_dir(cell.dataset, cell.method, cell.name), seed).exists() for seed in range(runs))


def chosen_cells(params: dict, only: list[str] | None) -> list[config.Cell]:
    """The cells of ``params`` whose ``dataset/method/cell`` matches one of the patterns ``only``
    (all where None); a pattern that matches no cell is an error naming it."""
    cells = config.cells(params)
    for pattern in only or []:
        if not any(fnmatch.fnmatchcase(str(cell), pattern) for cell in cells):
            example = f", e.g. {cells[0]}" if cells else "; params.yaml has none"
            raise config.ConfigError(f"--only: {pattern!r} matches no cell (cells are named dataset/method/cell{example})")
    return [cell for cell in cells if only is None or any(fnmatch.fnmatchcase(str(cell), p) for p in only)]


def plan_jobs(params: dict, runs: int, device: str, only: list[str] | None = None) -> list[Job]:
    """Every cell (of ``only``'s patterns) short of ``runs`` seeds, in the queue's order. A cell's
    seeds are those of its experiment (:func:`~pipeline.engine.spec.experiment`): a cell of the
    same network in another study lends them (the train stage copies them), and of two cells
    short, only the first in the queue's order is planned. A cell's seconds count the chunks that
    train side by side, as the check stage's plan does: its own, or those of the replica batch
    :func:`run_queue` trains it in (its family's cells of one tier with the same replica key),
    whichever cell's seeds they hold."""
    baselines = config.baseline_methods(params)
    groups = cells_by_experiment(params, config.cells(params))
    network_of = {cell: network for network, group in groups.items() for cell in group}
    network_has = {network: max(max(seeds_present(cell, runs), min(config.runs_for(params, cell), runs))
                                for cell in group) for network, group in groups.items()}
    rows, batch_to_go = [], {}
    for cell in chosen_cells(params, only):
        have = network_has[network_of[cell]]
        if have >= runs:
            continue
        spec = cell_spec(params, cell)
        batch = (tier_of(cell), cell.dataset, cell.method, replica_batch(params, cell, spec))
        rows.append((cell, have, spec["engine"], batch, plan.cell_measured(params, cell, device, baselines)))
    first_of: dict[str, tuple] = {}  # of a network's short cells, the first in the tiers' order
    for row in sorted(rows, key=lambda row: row[3][0]):
        first_of.setdefault(network_of[row[0]], row)
    rows = list(first_of.values())
    for _, have, _, batch, _ in rows:
        batch_to_go[batch] = batch_to_go.get(batch, 0) + runs - have
    jobs = []
    for cell, have, engine_kind, batch, measured in rows:
        to_go = runs - have
        side_by_side = cell_side_by_side(params, cell, engine_kind, batch_to_go[batch], device)
        seconds = None if measured is None else measured[0] * to_go / plan.seeds_at_once(to_go, side_by_side)
        jobs.append(Job(cell, batch[0], have, to_go, seconds))
    # unmeasured cells last in their tier: their cost is unknown
    return sorted(jobs, key=lambda j: (j.tier, j.seconds is None, j.seconds or 0.0))


def plan_lines(jobs: list[Job], runs: int, deadline: float | None, device: str) -> list[str]:
    lines = [f"queue on {device}: {len(jobs)} cells short of {runs} seeds, in this order "
             f"(estimates: committed seconds per seed on {device}, scaled by range and width, over the "
             f"chunks that train side by side)"]
    total, passed = 0.0, False
    for job in jobs:
        if deadline is not None and not passed and job.seconds is not None and total + job.seconds > deadline:
            lines.append(f"  -- the deadline ({duration(deadline)}) falls here --")
            passed = True
        total += job.seconds or 0.0
        cost = "no measured figure" if job.seconds is None else f"~{duration(job.seconds)} (total ~{duration(total)})"
        lines.append(f"  {TIERS[job.tier]}: {job.cell}: {job.have} -> {runs} seeds, {cost}")
    unknown = sum(job.seconds is None for job in jobs)
    lines.append(f"  all: ~{duration(total)}" + (f", plus {unknown} cells without a measured figure" if unknown else ""))
    return lines


def run_queue(params: dict, jobs: list[Job], runs: int, deadline: float | None) -> list[str]:
    """Train the jobs' seeds family by family in the queue's order, through the engine the train
    stage uses (this machine, or the Dask cluster of ``CADNET_CLUSTER``); what was trained, a
    line a family."""
    from pipeline import train  # the dry run needs none of it
    from pipeline.engine import dispatch
    from pipeline.engine.cells import prepare_cell, replica_groups

    stop_at = None if deadline is None else time.monotonic() + deadline
    done, graphs = [], {}
    with dispatch.engine(params) as engine:
        for tier in range(len(TIERS)):
            families: dict[tuple[str, str], list[Job]] = {}
            for job in (j for j in jobs if j.tier == tier):
                families.setdefault((job.cell.dataset, job.cell.method), []).append(job)
            for (dataset, method), family in families.items():
                if stop_at is not None and time.monotonic() >= stop_at:
                    return done + ["deadline reached; run the queue again to go on"]
                specs = [{**cell_spec(params, job.cell), "runs": runs} for job in family]
                twins = family_twins(params, dataset, method)
                cells = [prepare_cell(params, spec, graphs, twins) for spec in specs]
                for group in replica_groups(cells):
                    finished = train.train_pending(params, group, engine, stop_at=stop_at)
                    done.append(f"{dataset}/{method}: {', '.join(c.name for c in group)}"
                                + ("" if finished else " (stopped at the deadline)"))
                    if not finished:
                        return done + ["deadline reached; run the queue again to go on"]
    return done


def pack(jobs: list[Job], path: Path) -> int:
    """The seed files of the jobs' cells into the tar ``path``; how many."""
    files = [p for job in jobs for p in sorted(run_dir(job.cell.dataset, job.cell.method, job.cell.name).glob("seed_*.pt"))]
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for file in files:
            tar.add(file, arcname=str(file))
    return len(files)


def parse_duration(text: str) -> float:
    """``90s``, ``9m``, ``1.5h`` -> seconds; more than none (a deadline of 0 would plan the
    whole queue, then start nothing)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smh])", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90s, 9m or 1.5h")
    seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}; allowed values: a duration above 0, such as 90s, 9m or 1.5h")
    return seconds


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.queue", description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [--runs N] [--deadline T] [--only PATTERN ...] [--dry-run] [--pack FILE]")
    parser.add_argument("--runs", type=int, default=100, help="seeds each cell should have (default 100)")
    parser.add_argument("--deadline", type=parse_duration, default=None, help="stop starting work after this long: 90s, 9m, 1.5h")
    parser.add_argument("--only", nargs="+", metavar="PATTERN", default=None,
                        help="only the cells whose dataset/method/cell matches: 'pubmed/cadnet/beta-*'")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, train nothing")
    parser.add_argument("--pack", type=Path, default=None, help="write the planned cells' seed files into this tar")
    args = parser.parse_args(argv)
    if args.runs < 1:
        raise config.ConfigError(f"--runs: {args.runs}; allowed values: an integer >= 1")
    params = config.load_params()
    config.check_everything(params)
    device = resolve_device_name(params.get("device", "auto"))
    jobs = plan_jobs(params, args.runs, device, args.only)
    print("\n".join(plan_lines(jobs, args.runs, args.deadline, device)), file=sys.stderr)
    if args.dry_run:
        return
    for line in run_queue(params, jobs, args.runs, args.deadline):
        print(f"queue: {line}", file=sys.stderr)
    if args.pack is not None:
        print(f"queue: {pack(jobs, args.pack)} seed files in {args.pack}", file=sys.stderr)


if __name__ == "__main__":
    config.run_main(main, kept="every seed file finished before it is kept")
