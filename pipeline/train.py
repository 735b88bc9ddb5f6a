"""Train stage: ``python -m pipeline.train <dataset> [<method>]``: trains a (dataset, method)
family's cells through the one training loop (:mod:`pipeline.engine.loop`).

Trains seeds ``0 .. runs-1`` of one (dataset, method) pair and writes what the later stages
read, in ``reports/eval/<dataset>/`` (committed, so that every stage after this one reruns on any
clone): ``<method>.csv`` (one row per seed), ``<method>_gamma.csv`` (histogram of the adaptive
weights gamma over nodes at each seed's selected epoch) and ``<method>_epochs.csv`` (per epoch:
how many seeds still run, and the mean and 10-90% spread of their losses).

The seeds themselves are a cache, one file per seed in ``data/runs/<dataset>/<method>/
seed_NNN.pt``, outside DVC. Each file records its seed, dataset, method and the identity of its
cell's spec (:func:`pipeline.engine.spec.seed_identity`: settings, data and code versions), so an
interrupted run keeps its finished seeds and a rerun trains only the missing ones. Nothing
trained is deleted: seed files of other settings (or beyond ``runs``) are moved to
``data/stash/<dataset>/<method>/<identity>/`` and moved back when those settings return, so a
quick look with ``-S runs=10``, a bad value, or an experiment costs no finished seed.
``--shard K/N`` trains share K of N of the seeds (whole blocks of a baseline's fixed chunks) and
writes only their seed files, so that N processes or machines can split a cell; ``dvc repro``
then adopts them (0 to train) and writes the tables.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pickle
import re
import shutil
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import NamedTuple

import torch
from joblib import Parallel, delayed, effective_n_jobs

from pipeline import config, progress
from pipeline.engine import plan
from pipeline.engine.memory import estimate_peak_bytes, graph_sizes, peak_bytes  # noqa: F401  (tests reach them here)
from pipeline.check import resolve_device_name
from pipeline.files import meant_name, read_record, save_torch, write_atomic, write_csv_atomic, write_text_atomic
from pipeline.paths import LOCKS_ROOT, PROCESSED_ROOT, RUNS_ROOT, STASH_ROOT, run_dir, seed_file
from pipeline.preprocess import load_features_as_read, load_graph, sparse_features
from pipeline.engine.loop import (Replica, TrainingError, settings_free_within_a_batch, train_chunk, train_replicas,
                                  train_seed)
from pipeline.engine.spec import cell_name, cell_of, current_family, seed_identity, spec_hash
from pipeline.engine.splits import split_masks
from pipeline.report.tables import (epoch_summary, family_tables, gamma_histogram, per_seed_table, read_written,
                                    table_paths, tables_hold, write_written, written_record)

SEED_FILE = re.compile(r"seed_(\d+)\.pt")
# Methods whose CPU seeds each run in a process of their own. PyG's GraphUNet squares its
# pooled adjacency with torch's CSR x CSR product, and on CPU (torch 2.13, MKL) that product
# does not give back its output's memory (the open pytorch/pytorch#109445 reports the same
# growth): measured here, 17 MB per epoch on Cora, about 3.4 GB per 200-epoch seed, so one
# long-lived worker was killed for memory after seven seeds. A finished process gives it back.
FRESH_PROCESS_PER_SEED = {"graph_unet"}


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when present, so the same params run on a laptop or a GPU box."""
    return torch.device(resolve_device_name(name))



# ---------------------------------------------------------------------------- bookkeeping


def features_rule(params: dict, dataset: str, hp: dict):
    """The rule a cell normalises its features by, where it is not the one graph.pt was written
    with (a baseline under ``baseline_protocol.<dataset>.normalize_features``); None: graph.pt's features as they are."""
    if "normalize_features" not in hp:
        return None
    written_with = config.hparams_for(params, dataset)["normalize_features"]
    return None if hp["normalize_features"] == written_with else hp["normalize_features"]


def load_cell_graph(dataset: str, rule=None) -> dict:
    """The graph a cell trains on: graph.pt, with the features as read normalised by ``rule``
    where :func:`features_rule` gives one."""
    graph = load_graph(dataset, root=PROCESSED_ROOT)
    if rule is not None:
        graph["x"] = sparse_features(load_features_as_read(dataset, PROCESSED_ROOT), rule)
    return graph


def seed_number(path: Path) -> int | None:
    match = SEED_FILE.fullmatch(path.name)
    return int(match.group(1)) if match else None


def holds_seed(record: dict | None, seed: int, dataset: str, method: str, fingerprint: str) -> bool:
    """The record is seed ``seed`` of this dataset and method, made with this fingerprint
    (a copied or renamed seed file is not counted as another seed)."""
    return (record is not None and record.get("fingerprint") == fingerprint and record.get("seed") == seed
            and record.get("dataset", dataset) == dataset and record.get("method", method) == method)


def sync_seeds(dataset: str, method: str, runs: int, fingerprint: str,
               run_dir: Path, stash_dir: Path | None = None, owns=None) -> list[int]:
    """Make ``run_dir`` hold exactly the finished seeds ``0 .. runs-1`` of ``fingerprint`` and
    return the seeds still to train. Seed files of other settings, and seeds ``>= runs``, go to
    ``stash_dir/<their fingerprint>/``; seeds of this fingerprint come back from there.
    ``owns(seed)`` (a shard's share, :func:`shard_owner`; default all) limits all of this to
    the seeds it owns, files of no seed to the shard that owns seed 0, so that shards running
    side by side never touch the same file."""
    stash_dir = stash_dir or STASH_ROOT / dataset / method
    owns = owns or (lambda seed: True)
    run_dir.mkdir(parents=True, exist_ok=True)
    done = set()
    for path in sorted(p for p in run_dir.iterdir() if p.is_file()):
        cut_short = meant_name(path)  # a write of files.write_atomic that never finished
        seed = seed_number(Path(cut_short or path.name))
        if not owns(seed or 0):
            continue
        if cut_short:  # never a finished seed
            path.unlink()
            continue
        record = read_record(path)
        if seed is not None and seed < runs and holds_seed(record, seed, dataset, method, fingerprint):
            done.add(seed)
        else:
            set_aside(path, record, stash_dir)
    stashed = stash_dir / fingerprint
    for seed in filter(owns, range(runs)):
        kept = seed_file(stashed, seed)
        if seed not in done and kept.exists() and holds_seed(read_record(kept), seed, dataset, method, fingerprint):
            shutil.move(kept, seed_file(run_dir, seed))
            done.add(seed)
    missing = [s for s in range(runs) if s not in done and owns(s)]
    for twin_dir in twin_cells(run_dir, fingerprint) if missing else []:
        for seed in missing:
            twin = seed_file(twin_dir, seed)
            if seed not in done and twin.exists() and holds_seed(read_record(twin), seed, dataset, method, fingerprint):
                write_atomic(seed_file(run_dir, seed), functools.partial(shutil.copyfile, twin))
                done.add(seed)
    return [s for s in range(runs) if s not in done and owns(s)]


def twin_cells(run_dir: Path, fingerprint: str) -> list[Path]:
    """The seed folders of the family's other cells that train under the same identity (a study
    point that is another study's cell: β at the dataset's own value is Table 2's cell), whose
    seeds this cell copies rather than trains again. One file of each tells."""
    twins = []
    for other in sorted(p for p in run_dir.parent.iterdir() if p.is_dir() and p != run_dir):
        first = next(iter(sorted(other.glob("seed_*.pt"))), None)
        if first is not None and (read_record(first) or {}).get("fingerprint") == fingerprint:
            twins.append(other)
    return twins


def stash_loose_seeds(dataset: str, method: str) -> None:
    """Seed files that lie in the family's folder itself (data/runs/<dataset>/<method>/seed_NNN.pt,
    the layout from before a family held several cells) go to the stash under their identity,
    from where the cell of that spec takes them back (:func:`sync_seeds`)."""
    family_dir = RUNS_ROOT / dataset / method
    for path in sorted(family_dir.glob("seed_*.pt")) if family_dir.is_dir() else []:
        set_aside(path, read_record(path), STASH_ROOT / dataset / method)


def set_aside(path: Path, record: dict | None, stash_dir: Path) -> None:
    """A seed file into ``stash_dir/<its fingerprint>/``, where a run of its settings finds it."""
    owner = "unreadable" if record is None else str(record.get("fingerprint", "unknown"))
    kept = stash_dir / owner / path.name
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(path, kept)


def parse_shard(argv: list[str]) -> tuple[list[str], tuple[int, int]]:
    """``--shard K/N`` taken out of ``argv``: this process trains share K of N (default 0/1, all)."""
    if "--shard" not in argv:
        return argv, (0, 1)
    at = argv.index("--shard")
    text = argv[at + 1] if at + 1 < len(argv) else ""
    match = re.fullmatch(r"(\d+)/(\d+)", text)
    if not match or int(match.group(1)) >= int(match.group(2)):
        raise config.ConfigError(f"--shard: {text!r} is not K/N with 0 <= K < N, e.g. --shard 0/4")
    return argv[:at] + argv[at + 2:], (int(match.group(1)), int(match.group(2)))


def shard_owner(shard: tuple[int, int], block: int):
    """Seed s belongs to share (s // block) % N: whole blocks (a baseline's fixed chunks) stay in
    one share, and the N shares of a cell together are its full run, seed for seed."""
    k, n = shard
    return lambda seed: (seed // block) % n == k


@functools.lru_cache(maxsize=1)
def _graph_in_worker(dataset: str, rule) -> dict:
    """Each joblib worker loads the graph once instead of receiving a pickled copy per seed."""
    torch.set_num_threads(1)
    return load_cell_graph(dataset, rule)


def _train_seed_in_worker(dataset: str, rule, hp: dict, method: str, seed: int) -> dict:
    exit_with_parent()
    return train_seed(_graph_in_worker(dataset, rule), hp, seed, "cpu", method)


def chunk_size(graph: dict, hp: dict, params: dict, runs: int) -> int:
    """Seeds per batched chunk: at most ``seed_chunk`` (the cell's ``hp``, else ``params``;
    ``auto``: no limit), fewer where the estimated peak memory would pass
    ``memory_budget_gb``, evened out over the chunks needed.
    CAD-Net's seeds do not depend on their chunk; a baseline's share its chunk's dropout
    stream, so its fingerprint records the size (:func:`main`)."""
    if runs == 0:  # a cell set to 0 runs trains nothing; any size will do
        return 1
    cap = hp.get("seed_chunk", params.get("seed_chunk", "auto"))  # the cell's own, else the global
    limit = runs if cap == "auto" else min(cap, runs)
    budget = params.get("memory_budget_gb", 6) * 2**30
    fits = max([s for s in range(1, limit + 1) if peak_bytes(graph, hp, s) <= budget], default=1)
    chunks = -(-runs // fits)
    return -(-runs // chunks)


def fixed_blocks(pending: list[int], size: int, runs: int) -> list[list[int]]:
    """For a method whose batched seeds share their chunk's dropout stream: the fixed blocks of
    seeds ``[k*size, (k+1)*size)`` that hold a pending seed, each trained whole, so that a
    resumed run repeats exactly what a full run does (only the pending seeds are written)."""
    return [list(range(k * size, min((k + 1) * size, runs))) for k in sorted({seed // size for seed in pending})]


def check_memory(graph: dict, hp: dict, params: dict, where: str) -> None:
    """Refuse, before anything is trained or moved, settings whose single seed would not fit."""
    one_seed = peak_bytes(graph, hp, 1)
    budget = params.get("memory_budget_gb", 6)
    if one_seed > budget * 2**30:
        raise config.ConfigError(
            f"memory_budget_gb: {budget} GB is below the estimated peak of one seed of {where} "
            f"({one_seed / 2**30:.3g} GB with hidden={hp.get('hidden')}, K={hp.get('K')}); raise it or lower those")


def train_seeds(dataset: str, rule, hp: dict, method: str, seeds: list[int], device: torch.device, n_jobs: int):
    """Yield seed records as they finish: joblib processes on CPU (a fresh process per seed for
    the methods of ``FRESH_PROCESS_PER_SEED``), one after another on CUDA."""
    if device.type == "cpu" and method in FRESH_PROCESS_PER_SEED:
        yield from in_fresh_processes(_train_seed_in_worker, [(dataset, rule, hp, method, s) for s in seeds],
                                      effective_n_jobs(n_jobs))
        return
    if device.type == "cuda" or n_jobs == 1 or len(seeds) == 1:
        graph = load_cell_graph(dataset, rule)
        for seed in seeds:
            yield train_seed(graph, hp, seed, device, method)
        return
    jobs = (delayed(_train_seed_in_worker)(dataset, rule, hp, method, seed) for seed in seeds)
    yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered")(jobs)


def _pickled_result(function, args: tuple) -> bytes:
    """A result as plain bytes: torch would hand its tensors over as shared memory that the
    worker, ending after this one call, takes away before they are read."""
    return pickle.dumps(function(*args))


def in_fresh_processes(function, calls: list[tuple], workers: int):
    """Yield ``function(*args)`` for each ``args`` of ``calls`` as they finish, each call in a
    process of its own, which gives all its memory back when it ends. joblib reuses its workers
    and cannot do this; the standard library's pool can (``max_tasks_per_child``)."""
    pool = ProcessPoolExecutor(max(1, workers), mp_context=get_context("spawn"), max_tasks_per_child=1)
    try:
        for done in as_completed([pool.submit(_pickled_result, function, args) for args in calls]):
            yield pickle.loads(done.result())
    finally:  # an error or Ctrl-C: the seeds not started yet are not started
        pool.shutdown(wait=True, cancel_futures=True)


def device_label(device: torch.device) -> str:
    """``cpu`` or ``cuda (NVIDIA H200)``: stored with each seed, since its timings are that device's."""
    return f"cuda ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "cpu"


# What torch's CPU allocator says when the OS refuses it: "can't allocate memory" (torch 2.13's
# DefaultCPUAllocator), "not enough memory" (older releases); CUDA raises OutOfMemoryError.
CPU_ALLOCATOR_REFUSALS = ("can't allocate memory", "not enough memory")


def is_out_of_memory(err: BaseException) -> bool:
    return isinstance(err, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(err, RuntimeError) and any(w in str(err) for w in CPU_ALLOCATOR_REFUSALS))


@contextlib.contextmanager
def cell_lock(dataset: str, method: str, shard: tuple[int, int], where: str):
    """Hold the cell while training it: a second train of the same cell (or of the same share of
    it) is refused instead of training the same seeds twice. Shares of one cell hold its lock
    shared and their own exclusively, so they run side by side, but not beside a whole run. The
    system drops the locks when the process ends, however it ends."""
    LOCKS_ROOT.mkdir(parents=True, exist_ok=True)
    whole = shard == (0, 1)
    paths = [LOCKS_ROOT / f"{dataset}-{method}.lock"]
    paths += [] if whole else [LOCKS_ROOT / f"{dataset}-{method}.shard{shard[0]}of{shard[1]}.lock"]
    handles = []
    try:
        for path, mode in zip(paths, [fcntl.LOCK_EX if whole else fcntl.LOCK_SH, fcntl.LOCK_EX]):
            handle = open(path, "a+")
            handles.append(handle)
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise TrainingError(f"{where}: {holder} is training this cell now; wait for it to finish "
                                    f"or stop it, then run this again") from None
            if mode == fcntl.LOCK_EX:
                handle.truncate(0)
                handle.write(f"process {os.getpid()}")
                handle.flush()
        yield
    finally:
        for handle in handles:
            handle.close()


def exit_with_parent(poll_seconds: float = 1.0) -> None:
    """In a worker process: exit as soon as the process that started it is gone. A train stage
    killed outright (kill -9, the machine's OOM killer) cannot stop its workers itself, and
    joblib's would go on training for nobody. Started once per worker."""
    global _WATCHING_PARENT
    if _WATCHING_PARENT:
        return
    _WATCHING_PARENT = True
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


_WATCHING_PARENT = False


def main(argv: list[str]) -> None:
    argv, shard = parse_shard(argv)
    if not argv:
        raise config.ConfigError("usage: python -m pipeline.train <dataset> [<method>] [--shard K/N]")
    dataset, method = config.cell_args(argv, "train")
    params = config.load_params()
    device = resolve_device(params.get("device", "auto"))
    specs = current_family(params, dataset, method)
    written = read_written(dataset, method)
    kept = [spec for spec in specs if shard == (0, 1) and tables_hold(dataset, method, spec, written)]
    if kept:
        print(f"train {dataset}/{method}: {len(kept)} of its {len(specs)} cells' tables were written "
              f"under their spec already; kept", file=sys.stderr)
    # every check that can fail comes before any seed file is touched
    graphs: dict = {}
    prepared = [prepare_cell(params, spec, device, graphs) for spec in specs if spec not in kept]
    # a kept cell's seed files are put in order too (its spec's in data/runs, others' in the
    # stash), so that data/runs holds the seeds of the committed tables; none there, none to order
    ordered = [prepare_cell(params, spec, device, graphs, check=False) for spec in kept] if has_seed_files(dataset, method) else []
    family = f"{dataset}/{method}" + ("" if shard == (0, 1) else f" (shard {shard[0]}/{shard[1]})")
    with cell_lock(dataset, method, shard, family):
        for cell in ordered:
            order_seeds(cell, shard_owner(shard, cell.size))
        for group in replica_groups(prepared):
            for cell, records in zip(group, train_cells(params, group, shard, device)):
                if shard == (0, 1):  # a share writes seeds only; the whole run that adopts them writes the tables
                    write_tables(dataset, method, cell.name, records)
                    written[cell.name] = written_record(dataset, method, cell.spec)
                    write_written(dataset, method, written)
        if shard == (0, 1):
            forget_other_cells(dataset, method, [cell_name(spec) for spec in specs], written)


class PreparedCell(NamedTuple):
    """A cell whose settings, graph and memory were checked, ready to train."""
    spec: dict
    name: str
    hp: dict
    rule: object
    graph: dict
    size: int  # seeds per chunk
    fingerprint: str  # what its seed files record (spec.seed_identity)

    @property
    def run_dir(self) -> Path:
        """The folder of data/runs that holds the cell's seed files."""
        return run_dir(self.spec["dataset"], self.spec["method"], self.name)


def prepare_cell(params: dict, spec: dict, device: torch.device, graphs: dict, check: bool = True) -> PreparedCell:
    """The cell's settings, graph (one load per feature rule, kept in ``graphs``) and chunk size,
    and, with ``check``, whether its split and memory allow it to train."""
    cell = cell_of(spec)
    hp = config.cell_hparams(params, cell)  # with the cell's own seed_chunk, which sizes its chunks
    rule = features_rule(params, cell.dataset, hp)
    if rule not in graphs:
        graphs[rule] = load_cell_graph(cell.dataset, rule)
    graph = graphs[rule]
    if check:
        split_masks(graph, hp, 0)
        check_memory(graph, hp, params, str(cell))
    size = chunk_size(graph, hp, params, spec["runs"]) if spec["engine"] == "batched" else 1
    # a method whose batched seeds share their chunk's dropout stream records the chunk size,
    # and trains whole fixed blocks of seeds, so that a resumed run repeats a full one
    fingerprint = seed_identity(spec, size if "chunking" in spec else None)
    return PreparedCell(spec, cell.name, hp, rule, graph, size, fingerprint)


def has_seed_files(dataset: str, method: str) -> bool:
    return any(next((root / dataset / method).rglob("seed_*.pt"), None) for root in (RUNS_ROOT, STASH_ROOT))


def order_seeds(cell: PreparedCell, owns) -> list[int]:
    """The cell's finished seeds (of the share ``owns``) in its folder of data/runs, every other
    seed file in the stash; the seeds still to train."""
    spec = cell.spec
    if owns(0):
        stash_loose_seeds(spec["dataset"], spec["method"])
    return sync_seeds(spec["dataset"], spec["method"], spec["runs"], cell.fingerprint, run_dir=cell.run_dir, owns=owns)


def replica_groups(cells: list[PreparedCell]) -> list[list[PreparedCell]]:
    """The family's cells in batches of cells that train side by side as replicas: batched
    cells of a method whose seeds do not depend on their chunk, on the same graph, whose settings
    differ only in their split and the method's ``replica_settings``
    (:func:`pipeline.engine.loop.differing_settings`), e.g. a beta study's 21 cells, or Table 2's
    cell with its label-rate and random-split cells. Every other cell is a batch of its own."""
    groups: dict = {}
    for cell in cells:
        free = settings_free_within_a_batch(cell.spec["method"], cell.hp)
        if cell.spec["engine"] != "batched" or not free or "chunking" in cell.spec:
            groups[("alone", cell.name)] = [cell]
            continue
        shared = tuple(sorted((k, repr(v)) for k, v in cell.hp.items() if k not in free))
        groups.setdefault((cell.rule, shared), []).append(cell)
    return list(groups.values())


def train_cells(params: dict, cells: list[PreparedCell], shard: tuple[int, int], device: torch.device) -> list[list[dict]]:
    """Train the seeds that the cache of each of ``cells`` (one of :func:`replica_groups`) lacks
    (of ``shard``'s share), side by side as replicas of one batch, each saved as it finishes;
    each cell's records, seeds 0 .. runs-1 (none for a share: it writes seeds only)."""
    train_pending(params, cells, shard, device)
    if shard != (0, 1):
        return [[] for _ in cells]
    return [load_records(cell.run_dir, cell.spec["dataset"], cell.spec["method"], cell.spec["runs"], cell.fingerprint)
            for cell in cells]


def train_pending(params: dict, cells: list[PreparedCell], shard: tuple[int, int], device: torch.device,
                  stop_at: float | None = None) -> bool:
    """The training of :func:`train_cells`, seed files only. With ``stop_at`` (a
    ``time.monotonic()`` time), no chunk starts that the measured figure says would end after
    it; whether every seed was trained."""
    first = cells[0]
    spec, hp, graph, size = first.spec, first.hp, first.graph, first.size
    dataset, method, runs, engine = spec["dataset"], spec["method"], spec["runs"], spec["engine"]
    names = first.name if len(cells) == 1 else f"{len(cells)} cells as one batch ({cells[0].name} .. {cells[-1].name})"
    where = f"{dataset}/{method}/{names}" + ("" if shard == (0, 1) else f" (shard {shard[0]}/{shard[1]})")
    owns = shard_owner(shard, size)
    pending = [(cell, seed) for cell in cells for seed in order_seeds(cell, owns)]
    share = sum(sum(map(owns, range(cell.spec["runs"]))) for cell in cells)
    if len(cells) > 1:  # the batch's chunks hold replicas of any of its cells
        size = chunk_size(graph, hp, params, len(pending))
    how = f"chunks of up to {size}" if engine == "batched" else "one at a time"
    side_by_side = plan.workers_side_by_side(engine == "single", device.type, params.get("n_jobs", -1))
    measured = group_measured(params, cells, device.type)
    estimate = plan.estimate(dataset, method, len(pending), measured=measured, side_by_side=side_by_side)
    print(f"train {where}: {share} seeds, {share - len(pending)} reused, {len(pending)} to train "
          f"({engine}, {how}, {device.type}); {estimate}", file=sys.stderr)
    seeds = [seed for _, seed in pending]
    pending_seeds = set(seeds)
    if "chunking" in spec:
        batches = ([(first, r) for r in train_chunk(graph, hp, chunk, device, method) if r["seed"] in pending_seeds]
                   for chunk in fixed_blocks(seeds, size, runs))
    elif engine == "batched":  # one batch of records per chunk, so progress lines fall on chunk ends
        batches = (list(zip([c for c, _ in chunk], train_replicas(graph, [Replica(c.hp, s) for c, s in chunk], device, method)))
                   for chunk in (pending[k:k + size] for k in range(0, len(pending), size)))
    else:
        batches = ([(first, record)] for record in train_seeds(dataset, first.rule, hp, method, seeds, device,
                                                                params.get("n_jobs", -1)))
    trained_on = device_label(device)  # its timings are this device's
    bar = progress.outer(len(pending), f"train {where}", "seeds")
    per_seed = measured[0] / side_by_side if measured else 0.0
    left = len(pending)
    try:
        chunks = iter(batches)  # a chunk starts when the loop asks for it
        while left:
            if stop_at is not None and time.monotonic() + per_seed * min(size, left) > stop_at:
                return False
            batch = next(chunks)
            for cell, record in batch:
                record.update(fingerprint=cell.fingerprint, dataset=dataset, method=method, device=trained_on)
                save_torch(record, seed_file(cell.run_dir, record["seed"]))
            bar.set_postfix(last_acc=f"{100 * batch[-1][1]['test_acc']:.1f}")
            bar.update(len(batch))
            left -= len(batch)
    except TrainingError as err:
        raise TrainingError(f"{where}: {err}") from None
    except Exception as err:
        if not is_out_of_memory(err):
            raise
        raise TrainingError(f"{where}: out of memory on {device.type} with chunks of {size} seeds "
                            f"({str(err).splitlines()[0][:120]}); lower seed_chunk or memory_budget_gb") from None
    finally:
        bar.close()
    return True


def group_measured(params: dict, cells: list[PreparedCell], device: str) -> tuple[float, str] | None:
    """A seed's estimated cost in a replica batch of ``cells``, as the queue plans it
    (:func:`pipeline.engine.plan.cell_measured`): the dearest cell's, so that a deadline holds."""
    baselines = config.baseline_methods(params)
    figures = [plan.cell_measured(params, cell_of(cell.spec), device, baselines) for cell in cells]
    return max((f for f in figures if f is not None), default=None)


def load_records(run_dir: Path, dataset: str, method: str, runs: int, fingerprint: str) -> list[dict]:
    """Seeds ``0 .. runs-1`` of the cell from ``run_dir``, each the seed its file name says, of
    this cell and identity: a missing, copied or mixed-in seed file is an error, never a row
    counted twice or a number of other settings."""
    records = []
    for seed in range(runs):
        path = seed_file(run_dir, seed)
        record = read_record(path)
        if not holds_seed(record, seed, dataset, method, fingerprint):
            raise TrainingError(f"{path}: missing or not seed {seed} of {dataset}/{method} under its spec; "
                                f"run `dvc repro train@{dataset}-{method}` again")
        records.append(record)
    return records


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
    # can find _train_seed_in_worker by its module path.
    from pipeline import train

    config.run_main(train.main, kept="every seed file finished before it is kept (`dvc repro` trains only the others)")
