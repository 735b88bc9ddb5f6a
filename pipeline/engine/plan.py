"""What will be trained, how long it will take, and where one seed will not fit in memory, said
before any training starts.

The estimate is the committed run's own measurement of the same (dataset, method) family
(``reports/eval/<dataset>/<method>/<cell>.csv``: wall time per seed-epoch and epochs per seed)
times the seeds to train. A family whose committed seeds ran on another kind of device (Cora's
GAT, on a GPU) takes this device's benchmark figure (``reports/bench/<device>/``) times its
seeds' epochs. A cell never run borrows, and says so. A baseline: its figures on the other datasets, each scaled by how
much more the other baselines cost here than there. Otherwise: the same method's figure on the
dataset whose CAD-Net epoch costs nearest, scaled by CAD-Net's cost here over there; failing that,
its dataset's CAD-Net figure (Photo APPNP's first run was estimated at 9 min from that and took
84; Computers GCN at 29 min, where the scaled Photo GCN figure says 77, and took 100; PubMed
MixHop at 10.7 h from CAD-Net's cost ratio, and took 2.1). Those figures come from the machine that
produced the committed run (reports/timing.md names it; a figure measured on a GPU says so);
a GPU is much faster on the large graphs, a slower laptop slower. Torch-free, so the check
stage can print the whole plan quickly; the train stage repeats its own line with the seeds it actually reuses.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import os
import statistics
from pathlib import Path
from typing import NamedTuple, Sequence

from joblib import effective_n_jobs

from pipeline import config
from pipeline.errors import ConfigError
from pipeline.models import REGISTRY
from pipeline.paths import BENCH_ROOT, DATA_STATS_ROOT, EVAL_ROOT, bench_file
from pipeline.progress import duration


OTHER_MACHINE = "measured on another kind of machine"  # in an estimate's source where no figure is of this kind


class Figure(NamedTuple):
    """One committed cell's timing: what an estimate is made of."""
    seconds_per_seed: float
    ms_per_seed_epoch: float
    devices: list[str]

    def where(self) -> str:
        return "" if self.devices == ["cpu"] else f" on {', '.join(self.devices)}"  # a GPU's figure is no CPU's

    def all_of_kind(self, device: str) -> bool:
        return all(d.split(" ")[0] == device for d in self.devices)


def _figure(dataset: str, method: str, eval_root: Path, device: str, cell: str = "") -> Figure | None:
    """The family's figure from its cells' per-seed tables, ``reports/eval/<dataset>/<method>/
    <cell>.csv`` (their seeds pooled; ``cell``: that cell's alone), or None. Where its seeds ran
    on several devices, only the seeds of ``device``'s kind (``cpu``, ``cuda``) count when there
    are any: a CPU's and a GPU's times are not averaged."""
    folder = eval_root / dataset / method
    tables = sorted(p for p in folder.glob(f"{cell or '*'}.csv") if not p.stem.endswith(("_gamma", "_epochs"))) \
        if folder.is_dir() else []
    rows = [row for table in tables for row in _rows(table, table.stat().st_mtime_ns)]
    same_kind = [r for r in rows if (r.get("device") or "cpu").split(" ")[0] == device]
    rows = same_kind or rows
    try:
        per_epoch = [float(r["ms_per_seed_epoch"]) for r in rows]
        seconds = [ms * int(r["epochs_run"]) / 1000 for ms, r in zip(per_epoch, rows)]
    except (KeyError, ValueError):
        return None
    if not seconds:
        return None
    return Figure(sum(seconds) / len(seconds), sum(per_epoch) / len(per_epoch),
                  sorted({r.get("device") or "cpu" for r in rows}))


@functools.lru_cache(maxsize=None)
def _rows(table: Path, mtime_ns: int) -> tuple[dict, ...]:
    """A per-seed table's rows, read once per version of the file (``mtime_ns``): a plan of
    every cell asks for each family's figure once a cell."""
    with open(table, newline="") as handle:
        return tuple(csv.DictReader(handle))


def epochs_per_seed(dataset: str, method: str, eval_root: Path = EVAL_ROOT, device: str = "cpu") -> float | None:
    """The mean epochs a seed of the family ran in the committed run (early stopping ends most
    before the last), or None where none ran."""
    figure = _figure(dataset, method, eval_root, device)
    if figure is None or not figure.ms_per_seed_epoch:
        return None
    return 1000 * figure.seconds_per_seed / figure.ms_per_seed_epoch


def expected_epochs(dataset: str, method: str, params: dict | None, eval_root: Path = EVAL_ROOT,
                    device: str = "cpu") -> tuple[float, str] | None:
    """(epochs a seed of the family is expected to run, whose figure): its committed run's mean;
    where none ran, the median over the dataset's families that ran under the same epoch budget
    and early-stopping window (the rule acts alike on them: on Amazon and Coauthor it waits half
    the budget, and Physics's ChebNet, costed at 1000, stopped at 501-560); else the configured
    epochs, an upper bound. None without either."""
    ran = epochs_per_seed(dataset, method, eval_root, device)
    if ran is not None:
        return ran, "the committed run's"
    if params is None:
        return None
    own = config.hparams_for(params, dataset, method)
    rule = (own.get("epochs"), own.get("early_stop_window"))
    folder = eval_root / dataset
    # without early stopping every seed runs its budget: no peer can say better
    peers = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name != method) \
        if rule[1] and folder.is_dir() else []
    peer_epochs = [e for other in peers if _rule_of(params, dataset, other) == rule
                   for e in [epochs_per_seed(dataset, other, eval_root, device)] if e is not None]
    if peer_epochs:
        return statistics.median(peer_epochs), f"its {len(peer_epochs)} peers' (same budget and stopping rule) median"
    return (rule[0], "its configured") if isinstance(rule[0], (int, float)) else None


def _rule_of(params: dict, dataset: str, method: str) -> tuple | None:
    try:
        hp = config.hparams_for(params, dataset, method)
    except ConfigError:
        return None  # a folder of a method no longer registered
    return hp.get("epochs"), hp.get("early_stop_window")


def _other_datasets(eval_root: Path, dataset: str) -> list[str]:
    """The datasets with committed tables besides ``dataset`` (none before any run)."""
    return sorted(p.name for p in eval_root.iterdir() if p.is_dir() and p.name != dataset) if eval_root.is_dir() else []


def _scaled_from_another_dataset(dataset: str, method: str, eval_root: Path, device: str) -> tuple[float, str] | None:
    """The method's seconds per seed on the dataset whose CAD-Net epoch costs nearest this one's,
    times CAD-Net's cost per seed-epoch here over there (all figures of ``device``'s kind): GCN on
    Computers from GCN on Photo times 1.6. Rough (the epochs are the other dataset's, and methods
    do not scale alike), but nearer than CAD-Net's own figure."""
    here = _figure(dataset, "cadnet", eval_root, device)
    if here is None or not here.all_of_kind(device) or here.ms_per_seed_epoch <= 0:
        return None
    candidates = []
    for other in _other_datasets(eval_root, dataset):
        theirs = _figure(other, method, eval_root, device)
        cadnet_there = _figure(other, "cadnet", eval_root, device)
        if (theirs is not None and theirs.all_of_kind(device) and cadnet_there is not None
                and cadnet_there.all_of_kind(device) and cadnet_there.ms_per_seed_epoch > 0):
            ratio = here.ms_per_seed_epoch / cadnet_there.ms_per_seed_epoch
            candidates.append((abs(math.log(ratio)), other, theirs.seconds_per_seed, ratio))
    if not candidates:
        return None
    _, other, theirs, ratio = min(candidates)
    return theirs * ratio, (f"{other}/{method} scaled by {ratio:.2f}, CAD-Net's cost per epoch on {dataset} over "
                            f"{other}; this cell has no figure of its own, and methods do not scale alike")


def _scaled_by_other_baselines(dataset: str, method: str, eval_root: Path, device: str,
                               baselines: Sequence[str], params: dict | None = None) -> tuple[float, str] | None:
    """A baseline's seconds per seed on each other dataset where it ran, times the median, over
    the other baselines run on both datasets, of their seconds per seed here over there; the
    geometric mean of those (all figures of ``device``'s kind). Baselines scale with the graph
    more alike than CAD-Net does. Each of the 28 CPU baseline cells committed when this was chosen, left out
    in turn, was within x1.9 of this at the median, x3.6 at the 90th percentile and x4.3 at worst,
    against x3.4, x7.7 and x31 for CAD-Net's cost ratio (PubMed MixHop: 110 s per seed from
    this, 1359 from that, 299 measured). With ``params``, a peer counts only where it trains with
    the same implementation on both datasets: SGC's sparse Cora seed costs a thousandth of its
    vmapped CS seed, a ratio of implementations, not of graphs."""
    def seconds(where: str, who: str) -> float | None:
        figure = _figure(where, who, eval_root, device)
        return figure.seconds_per_seed if figure is not None and figure.all_of_kind(device) else None

    here = {peer: seconds(dataset, peer) for peer in baselines if peer != method}
    logs, donors = [], []
    for other in _other_datasets(eval_root, dataset):
        theirs = seconds(other, method)
        ratios = [here[peer] / there for peer in here
                  if here[peer] and same_implementation(params, peer, dataset, other)
                  and (there := seconds(other, peer))] if theirs else []
        if ratios:
            scale = statistics.median(ratios)
            logs.append(math.log(theirs * scale))
            donors.append(f"{other}/{method} x{scale:.2f}")
    if not logs:
        return None
    return math.exp(sum(logs) / len(logs)), (
        f"{', '.join(donors)}, the other baselines' median cost here over there; "
        "this cell has no figure of its own, and methods do not scale alike")


def same_implementation(params: dict | None, method: str, dataset: str, other: str) -> bool:
    """Whether ``method`` trains with the same implementation (``vmap`` or ``sparse``) on both
    datasets; True without ``params`` to say."""
    if params is None:
        return True
    def implementation(where: str):
        return setting_value(method, config.hparams_for(params, where, method), "implementation")
    return implementation(dataset) == implementation(other)


def cell_per_seed(dataset: str, method: str, cell: str, eval_root: Path = EVAL_ROOT, device: str = "cpu") -> float | None:
    """Seconds per seed of one cell's committed seeds of ``device``'s kind, or None where it has
    none."""
    figure = _figure(dataset, method, eval_root, device, cell)
    return figure.seconds_per_seed if figure is not None and figure.all_of_kind(device) else None


def measured_per_seed(dataset: str, method: str, eval_root: Path = EVAL_ROOT, device: str = "cpu",
                      baselines: Sequence[str] = (), params: dict | None = None) -> tuple[float, str] | None:
    """(seconds per seed, whose figure) from the committed per-seed tables, or None: the cell's
    own; else, for an entry that reads another's settings (``hparams_of``), that one's here;
    else, for one of ``baselines``, its figures elsewhere scaled by the other baselines' cost;
    else the method's on another dataset, scaled by CAD-Net's cost (same device kind);
    else the dataset's CAD-Net figure. A borrowed figure says so. ``params`` (where the caller
    has them) give a family never run its configured epochs for the benchmark's figure, and keep
    a borrowed figure to peers of one implementation (:func:`same_implementation`)."""
    own = _figure(dataset, method, eval_root, device)
    if own is not None and own.all_of_kind(device):
        return own.seconds_per_seed, f"{dataset}/{method}{own.where()}"
    # a figure of another kind of machine (a GPU's for a CPU run) would misstate this run's time:
    # the benchmark's figure of this kind, or a borrowed one, first; that one only where there is none
    bench = _from_bench(dataset, method, eval_root, device, params)
    if bench is not None:
        return bench
    borrowed = None if method == "cadnet" else _borrowed(dataset, method, eval_root, device, baselines, params)
    if borrowed is not None or own is None:
        return borrowed
    return own.seconds_per_seed, f"{dataset}/{method}{own.where()}, {OTHER_MACHINE} than this {device}: expect another time"


def cell_measured(params: dict, cell: "config.Cell", device: str = "cpu", baselines: Sequence[str] = (),
                  eval_root: Path = EVAL_ROOT) -> tuple[float, str] | None:
    """(seconds per seed, whose figure) for one cell on ``device``'s kind: its own committed
    seeds' figure (a top-up), else its family's (:func:`measured_per_seed`) times
    :func:`setting_factor`; None where no figure is measured. The queue plans with it and the
    train stage keeps its deadline and prints its estimate with it, so the two agree."""
    own = cell_per_seed(cell.dataset, cell.method, cell.name, eval_root=eval_root, device=device)
    if own is not None:
        return own, f"{cell} itself"
    measured = measured_per_seed(cell.dataset, cell.method, eval_root=eval_root, device=device, baselines=baselines,
                                 params=params)
    if measured is None:
        return None
    factor = setting_factor(params, cell)
    return measured[0] * factor, measured[1] + (f", x{factor:.2f} for its range and width" if factor != 1 else "")


def setting_factor(params: dict, cell: "config.Cell") -> float:
    """How many times its family's measured figure a seed of ``cell`` costs, by its settings: the
    square root of the ratio of its range (the method's ``range_key``) and of its hidden width
    to Table 2's, each where larger. A step or a layer's work grows with them, but the input
    layer over the sparse features, which neither changes, is much of an epoch; the square root
    fits the committed study cells (docs/notes.md). A smaller one counts as 1: an estimate too
    high keeps a deadline, one too low does not."""
    own, table = config.cell_hparams(params, cell), config.hparams_for(params, cell.dataset, cell.method)
    factor = 1.0
    for key in filter(None, (REGISTRY[cell.method].range_key, "hidden")):
        mine, theirs = (setting_value(cell.method, hp, key) for hp in (own, table))
        if isinstance(mine, int) and isinstance(theirs, int) and 0 < theirs < mine:
            factor *= (mine / theirs) ** 0.5
    return factor


def setting_value(method: str, hp: dict, key: str):
    """``key``'s value in a cell's settings ``hp``, else its default in ``method``'s settings
    schema (Table 2's GCN leaves ``layers`` out: the schema's 2), else None."""
    if key in hp:
        return hp[key]
    schema = REGISTRY[method].settings
    field = next((f for f in dataclasses.fields(schema) if f.name == key), None) if schema else None
    return None if field is None or field.default is dataclasses.MISSING else field.default


def _from_bench(dataset: str, method: str, eval_root: Path, device: str,
                params: dict | None = None) -> tuple[float, str] | None:
    """The method's ms per seed-epoch that ``python -m pipeline.bench`` measured on ``dataset``
    with this kind of device (``reports/bench/<device>/<dataset>.json`` beside ``eval_root``:
    its batched chunk's where it batches, else one seed's) times the epochs a seed ran in the
    committed run, of any device (early stopping ends most before the last), or where none ran,
    :func:`expected_epochs`'s; None where either is missing (:func:`training_ms`). Cora's GAT ran
    on a GPU only: its CPU estimate is this one, where CAD-Net's figure would say a twentieth of it."""
    path = bench_file(device, dataset, root=eval_root.parent / BENCH_ROOT.name)
    expected = expected_epochs(dataset, method, params, eval_root, device)
    if expected is None or not path.is_file():
        return None
    epochs, whose = expected
    try:
        figures = json.loads(path.read_text())["methods"]["figures"]
    except (ValueError, KeyError, TypeError):
        return None  # the benchmark's report names a corrupt file; an estimate goes without it
    row = next((r for r in figures if isinstance(r, dict) and r.get("method") == method), None)
    ms = row and training_ms(row, dataset, params)
    if ms is None:
        return None
    return ms * epochs / 1000, (f"{dataset}/{method}: the benchmark's {ms:.1f} ms per seed-epoch on {device} x "
                                f"{whose} {epochs:.0f} epochs a seed")


def training_ms(row: dict, dataset: str, params: dict | None = None) -> float | None:
    """A benchmark row's ms per seed-epoch of the network its method's cells train on
    ``dataset``: its batched chunk's, else its one seed's, but not where ``params`` train the
    method batched there: its one-seed figure then times the method's one-seed reference
    network (PyG's layers, dense features), not the network its cells train. None where it has
    no such figure."""
    method = row.get("method")
    trains_batched = (params is not None and method in REGISTRY
                      and REGISTRY[method].batched_for(config.hparams_for(params, dataset, method)))
    ms = row.get("batched") or (None if trains_batched else row.get("single"))
    return ms if isinstance(ms, (int, float)) and ms > 0 else None


def _borrowed(dataset: str, method: str, eval_root: Path, device: str,
              baselines: Sequence[str], params: dict | None = None) -> tuple[float, str] | None:
    """A cell's figure from other cells' (:func:`measured_per_seed`)."""
    network_of = REGISTRY[method].hparams_of if method in REGISTRY else ""
    same_network = network_of and _figure(dataset, network_of, eval_root, device)
    if same_network and same_network.all_of_kind(device):  # the entry differs from that one by a setting, not by its network
        return same_network.seconds_per_seed, f"{dataset}/{network_of}{same_network.where()}, the same network"
    scaled = (_scaled_by_other_baselines(dataset, method, eval_root, device, baselines, params)
              if method in baselines else None)
    scaled = scaled or _scaled_from_another_dataset(dataset, method, eval_root, device)
    if scaled is not None:
        return scaled
    cadnet = _figure(dataset, "cadnet", eval_root, device)
    if cadnet is None or not cadnet.all_of_kind(device):
        return None
    return cadnet.seconds_per_seed, (f"{dataset}/cadnet{cadnet.where()}; this cell has no figure of its own, and "
                                     "another method's epoch can cost several times CAD-Net's")


def estimate(dataset: str, method: str, seeds: int, eval_root: Path = EVAL_ROOT,
             measured: tuple[float, str] | None = None, device: str = "cpu", side_by_side: int = 1,
             baselines: Sequence[str] = ()) -> str:
    """``~12 min (at the committed run's 7.2 s per seed of cora/cadnet)``, or why there is none
    (``measured``: :func:`measured_per_seed`'s answer, where the caller has it already).
    ``side_by_side``: worker processes training at once (the single engine's seeds, or batched
    chunks with ``chunk_workers``, on CPU), each as fast as the per-seed figure, which was measured
    in such a worker where the cell's seeds were trained so."""
    if seeds == 0:
        return "nothing to train"
    measured = measured or measured_per_seed(dataset, method, eval_root, device, baselines)
    if measured is None:
        return f"no measured figure for {dataset} yet (run `python -m pipeline.bench --datasets {dataset}`)"
    per_seed, source = measured
    at_once = seeds_at_once(seeds, side_by_side)
    return (f"~{duration(per_seed * seeds / at_once)} (at the committed run's {per_seed:.1f} s per seed of {source}"
            + (f"; {at_once} worker processes side by side" if at_once > 1 else "") + ")")


def workers_side_by_side(single_engine: bool, device: str, n_jobs: int) -> int:
    """Seeds trained at once in worker processes: one per joblib worker for the single engine on
    CPU (pipeline/train.py), else one (a batched chunk is timed per seed already; CUDA runs
    seeds one after another)."""
    return effective_n_jobs(n_jobs) if single_engine and device == "cpu" else 1


def chunk_workers(device: str, workers: int, chunk_peak_bytes: int, budget_bytes: float) -> int:
    """Batched chunks trained at once on a CPU, each in a worker process of its own
    (``chunk_workers`` in params.yaml; -1: one per core): no more than their estimated peaks
    fit ``memory_budget_gb`` together, so a chunk sized to the budget alone trains alone.
    One on a GPU, which runs its chunks one after another."""
    if device != "cpu":
        return 1
    return max(1, min(effective_n_jobs(workers), int(budget_bytes // max(chunk_peak_bytes, 1))))


def seeds_at_once(seeds: int, side_by_side: int) -> int:
    """How many of a cell's ``seeds`` train at once: no more than there are (at least one)."""
    return max(1, min(side_by_side, seeds))


# Baselines whose first layer sends the input features themselves along every edge before any
# linear map shrinks them (PyG's SGConv and ChebConv: the gathered x_j and its edge-weighted
# copy, two [messages, features] tensors at once; SAGEConv's mean: x_j alone).
# Measured: SGC on Physics (530,417 messages of 8,415 features) was killed by the kernel with
# one seed on this 23 GB machine; on CS (182,121 of 6,805) it ran.
FEATURE_MESSAGE_COPIES = {"sgc": 2, "cheb": 2, "sage": 1}
BYTES_PER_FLOAT = 4


def feature_messages_peak_bytes(dataset: str, method: str, data_root: Path = DATA_STATS_ROOT) -> int | None:
    """Rough peak (bytes) of a method's first propagation of the input features: the message
    copies over every edge and self-loop, the dense features, their propagated copy and the
    cached result. Does not grow with the seeds (the shared input is propagated once). None
    for the other methods, or where preprocess has not described the dataset yet."""
    copies = FEATURE_MESSAGE_COPIES.get(method)
    sizes_file = data_root / f"{dataset}.json"
    if copies is None or not sizes_file.is_file():
        return None
    sizes = json.loads(sizes_file.read_text())
    messages = sizes["directed_edges"] + sizes["nodes"]
    return BYTES_PER_FLOAT * sizes["features"] * (copies * messages + 3 * sizes["nodes"])


def machine_memory_bytes() -> int | None:
    """This machine's physical memory, where the OS says (Linux, macOS)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def memory_warning(dataset: str, method: str, memory: int | None, data_root: Path = DATA_STATS_ROOT,
                   hp: dict | None = None) -> str | None:
    """A line for the plan where one seed's first propagation alone would pass ``memory``
    (CPU training: the kernel then kills the train stage, which DVC reports as exit -9). A cell
    whose settings ``hp`` select the sparse implementation sends no messages (SGC propagates
    the features as one sparse product)."""
    if (hp or {}).get("implementation", "vmap") == "sparse":
        return None
    peak = feature_messages_peak_bytes(dataset, method, data_root)
    if peak is None or memory is None or peak <= memory:
        return None
    return (f"warning: {dataset}/{method} passes its input features along every edge before any linear map, "
            f"about {peak / 2**30:.0f} GiB at once for one seed, more than this machine's {memory / 2**30:.0f} GiB: "
            "on CPU expect the kernel to kill its train stage (exit -9); a GPU with that much memory runs it")
