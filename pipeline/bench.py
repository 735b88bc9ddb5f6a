"""Benchmark: ``python -m pipeline.bench [--epochs N] [--datasets ...] [--methods-on ...]``.

Not a test and not a DVC stage. It measures on the current device (CUDA when present), records
each section's figures per dataset in ``reports/bench/<device>/<dataset>.json`` (with date,
commit and machine; a section measured again replaces its old figures, the others stay) and
writes ``reports/bench_<device>.md`` from every figure recorded for that device
(``--report-only``: rewrite it without measuring). The sections:

- engines: CAD-Net's
  (a) single-seed path (:func:`pipeline.engine.loop.train_seed`, one seed at a time),
  (b) batched engine (:func:`pipeline.engine.loop.train_chunk`, a chunk of seeds at once),
  (c) PyG's APPNP (K=10, alpha=0.1, hidden 64) trained one seed at a time with the same loop,
  (d) the authors' setup: one seed at a time, the dense feature matrix, PyG message passing
  (the single-seed network of (a) fed ``X`` dense, as their demo scripts feed it; written here
  from docs/SPEC.md, not their code),
  as ms per seed-epoch (a training step plus the eval-mode pass), the wall time they imply for
  100 seeds at the paper's epochs (no early stopping), and the ratios b/a, b/c and d/b (the
  batched engine's speed-up over the authors' setup). A dataset whose graph ``dvc repro`` has
  not written to ``data/processed`` is measured on a random graph of its node, edge, feature and
  class counts (docs/SPEC.md), labelled "(synthetic)".
- memory: peak memory of one chunk of the automatic size, measured against the estimate.
- profile (Cora): one batched chunk under torch's profiler.
- methods (``--methods-on``): every registry method, one seed and batched (Table B.8's measure).
- replicas (``--methods-on``): the β study's cells of CAD-Net as replicas of one batch against
  one cell's chunk of the same size.
- rivals (``--rivals-on``): every batchable baseline at 25 seeds and at one, beside a plain
  PyTorch version of the same network trained the same way (:mod:`pipeline.bench_plain`), in
  the same run, and the ratio; Graph U-Net and AGNN, one seed, beside PyG's example. CAD-Net
  the same way: its plain version is the yardstick of its goal against the authors' setup.

The report opens with the speed goals beside the figures that check them, and closes with what
is left of the paper at these figures: every cell short of 100 seeds on a dataset with method
figures (:func:`pipeline.queue.plan_jobs`), its seeds to go times its method's batched ms per
seed-epoch (one seed's where it has no batched form) times the epochs a seed of its family ran
in the committed run (the paper's epochs where none ran), summed by study.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from functools import partial
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.nn import APPNP

from pipeline import config, queue
from pipeline.bench_plain import EXAMPLES, time_plain
from pipeline.engine import plan
from pipeline.progress import duration
from pipeline.engine.memory import estimate_peak_bytes
from pipeline.models import BASELINES, REGISTRY
from pipeline.errors import DataError
from pipeline.files import write_text_atomic
from pipeline.paths import BENCH_REPORT, BENCH_ROOT, PROCESSED_ROOT, bench_file
from pipeline.preprocess import load_graph
from pipeline.engine.splits import per_class_split
from pipeline.stats import load_paper
from pipeline.engine.loop import Replica, make_optimizer, train_chunk, train_replicas, train_seed
from pipeline.engine.cells import chunk_size
from pipeline.engine.device import is_out_of_memory, resolve_device_name
from pipeline.engine.memory import graph_sizes

# an entry that reads another's settings (mixhop_l2) runs that one's network: its time is that one's
TIMED_BY_DEFAULT = tuple(name for name, entry in REGISTRY.items() if not entry.hparams_of)

# Stored feature entries per node assumed for the synthetic stand-ins (their files are not here).
ASSUMED_NNZ_PER_NODE = {"pubmed": 50, "computers": 260, "photo": 260, "cs": 50, "physics": 50}
RUNS = 100
PROFILE_EPOCHS = 5
SECTIONS = ("engines", "memory", "methods", "replicas", "rivals", "profile")
# The speed goals the report checks: CAD-Net batched per seed against the authors' setup, each
# batchable baseline at RIVAL_SEEDS seeds at or below a plain version of its network (Graph U-Net
# and AGNN, one seed, at or below PyG's example), and what is left of the paper: at 100 seeds a
# cell on one H200, at 20 on this CPU.
GOAL_VS_AUTHORS = {"cpu": 30, "cuda": 100}
GOAL_VS_PLAIN = 1.0
RIVAL_SEEDS = 25
GOAL_REMAINING_S = {"cuda": (RUNS, 45 * 60), "cpu": (20, 10 * 3600)}


def synthetic_graph(dataset: str, hp: dict, seed: int = 0) -> dict:
    """A random graph with the dataset's sizes: symmetric edges, row-normalised sparse features."""
    nodes, edges, features, classes = load_paper()["datasets"][dataset]
    g = torch.Generator().manual_seed(seed)
    pairs = torch.randint(0, nodes, (2, int(edges * 2.1)), generator=g)
    pairs = pairs[:, pairs[0] < pairs[1]]  # about half survive: one orientation of each edge
    pairs = torch.unique(pairs, dim=1)[:, :edges]
    edge_index = torch.cat([pairs, pairs.flip(0)], dim=1)
    if hp["self_loops"]:
        edge_index = torch.cat([edge_index, torch.arange(nodes).repeat(2, 1)], dim=1)
    nnz = min(ASSUMED_NNZ_PER_NODE[dataset], features)
    cols = torch.randint(0, features, (nodes * nnz,), generator=g)
    rows = torch.arange(nodes).repeat_interleave(nnz)
    x = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.full((nodes * nnz,), 1.0 / nnz),
                                (nodes, features), check_invariants=False).coalesce()
    y = torch.randint(0, classes, (nodes,), generator=g)
    y[: classes * 60] = torch.arange(classes).repeat(60)  # every class large enough to split
    return {"x": x, "edge_index": edge_index, "y": y, "num_classes": classes,
            "train_mask": None, "val_mask": None, "test_mask": None}


def has_real_graph(dataset: str) -> bool:
    return (PROCESSED_ROOT / dataset / "graph.pt").is_file()


def bench_graph(dataset: str, hp: dict) -> dict:
    if has_real_graph(dataset):
        return load_graph(dataset)
    return synthetic_graph(dataset, hp)


class APPNPNet(torch.nn.Module):
    """The common baseline: 2-layer MLP, then K=10 steps of personalised-PageRank propagation."""

    def __init__(self, in_features: int, hidden: int, classes: int, p_drop: float = 0.5):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(in_features, hidden), torch.nn.Linear(hidden, classes)
        self.prop = APPNP(K=10, alpha=0.1)
        self.p_drop = p_drop

    def forward(self, x, edge_index):
        x = torch.sparse.mm(x, self.lin1.weight.t()) + self.lin1.bias
        x = F.dropout(F.relu(x), self.p_drop, self.training)
        return F.log_softmax(self.prop(self.lin2(x), edge_index), dim=-1)


def time_appnp(graph: dict, hp: dict, epochs: int, device: torch.device) -> float:
    """ms per epoch of APPNP, one seed, same loop shape as train_seed (step + eval pass)."""
    torch.manual_seed(0)
    x, edge_index, y = (graph[k].to(device) for k in ("x", "edge_index", "y"))
    train_mask = per_class_split(graph["y"], graph["num_classes"], 20, 30, 0)[0].to(device)
    model = APPNPNet(x.size(1), 64, graph["num_classes"]).to(device)
    optimizer, _ = make_optimizer(model.parameters(), hp)
    times = []
    for _ in range(epochs + 1):  # the first epoch warms up and is not counted
        start = time.perf_counter()
        model.train()
        optimizer.zero_grad()
        F.nll_loss(model(x, edge_index)[train_mask], y[train_mask]).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            model(x, edge_index)
        _sync(device)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[1:])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(dataset: str, params: dict, epochs: int, device: torch.device) -> dict:
    hp = dict(config.hparams_for(params, dataset), early_stop_window=0)
    real = has_real_graph(dataset)
    if not real:  # the stand-ins have no public split (PubMed's real one does)
        hp["split"] = "per_class"
    paper_epochs = hp["epochs"]
    graph = bench_graph(dataset, hp)
    hp_short = dict(hp, epochs=epochs)
    train_seed(graph, dict(hp_short, epochs=1), 0, device)  # warm-up
    single = statistics.median(train_seed(graph, hp_short, s, device)["ms_per_seed_epoch"] for s in range(2))
    dense = dict(graph, x=graph["x"].to_dense())  # (d): the authors feed X dense
    train_seed(dense, dict(hp_short, epochs=1), 0, device)
    authors = statistics.median(train_seed(dense, hp_short, s, device)["ms_per_seed_epoch"] for s in range(2))
    del dense
    S = chunk_size(graph, hp, params, RUNS)
    batched = train_chunk(graph, hp_short, list(range(S)), device)[0]["ms_per_seed_epoch"]
    appnp = time_appnp(graph, hp, epochs, device)
    chunks = math.ceil(RUNS / S)
    sizes = graph_sizes(graph, hp)
    return {
        "dataset": dataset + ("" if real else " (synthetic)"),
        "single_ms": single, "batched_ms": batched, "appnp_ms": appnp, "authors_ms": authors, "chunk": S,
        "single_100_s": single * paper_epochs * RUNS / 1000,
        "batched_100_s": batched * S * paper_epochs * chunks / 1000,
        "appnp_100_s": appnp * paper_epochs * RUNS / 1000,
        "authors_100_s": authors * paper_epochs * RUNS / 1000,
        "epochs": paper_epochs,
        "estimate_100_gb": estimate_peak_bytes(**sizes, seeds=RUNS) / 2**30,
        "estimate_chunk_gb": estimate_peak_bytes(**sizes, seeds=S) / 2**30,
    }


def _peak_rss_of_batch(dataset: str, seeds: int) -> tuple[float, float]:
    """In a fresh process: RSS after loading, and peak RSS over 2 epochs of a batch (GiB)."""
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    params = config.load_params()
    hp = dict(config.hparams_for(params, dataset), epochs=2, early_stop_window=0)
    graph = load_graph(dataset)
    base = _status_gib("VmRSS")
    train_chunk(graph, hp, list(range(seeds)), "cpu")
    return base, _status_gib("VmHWM")


def _status_gib(field: str) -> float:
    """A memory figure of this process from /proc/self/status. VmHWM (peak RSS) starts afresh
    in a new program, unlike getrusage's ru_maxrss, which a spawned child inherits from its
    parent and which so reported the bench's own earlier peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 2**20  # kB -> GiB
    raise RuntimeError(f"{field} not in /proc/self/status")


def measured_peak_gb(dataset: str, seeds: int, device: torch.device) -> float:
    """Extra memory a chunk of ``seeds`` takes over the loaded graph: RSS on CPU (in a fresh
    process), allocator peak on CUDA."""
    if device.type == "cuda":
        params = config.load_params()
        hp = dict(config.hparams_for(params, dataset), epochs=2, early_stop_window=0)
        graph = load_graph(dataset)
        torch.cuda.reset_peak_memory_stats()
        train_chunk(graph, hp, list(range(seeds)), device)
        return torch.cuda.max_memory_allocated() / 2**30
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:  # a fresh process: its own peak
        base, peak = pool.submit(_peak_rss_of_batch, dataset, seeds).result()
    return peak - base


def profile_epoch(params: dict, device: torch.device, rows: int = 15) -> str:
    """Profile of a 100-seed chunk on Cora for PROFILE_EPOCHS epochs (setup included once)."""
    from torch.profiler import ProfilerActivity, profile

    hp = dict(config.hparams_for(params, "cora"), epochs=PROFILE_EPOCHS, early_stop_window=0)
    graph = load_graph("cora")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    train_chunk(graph, hp, list(range(RUNS)), device)  # warm-up
    with profile(activities=activities) as prof:
        train_chunk(graph, hp, list(range(RUNS)), device)
    key = "cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows)


def implementation(params: dict, dataset: str, method: str) -> str:
    """Which of its networks ``method`` trains on ``dataset`` under ``params``, for a row's label:
    a baseline's ``implementation`` setting (``vmap`` for MixHop, which has no other), ``-`` for
    CAD-Net and its variants (their batched engine is their only network)."""
    value = plan.setting_value(method, config.hparams_for(params, dataset, method), "implementation")
    return value or ("vmap" if (REGISTRY[method].hparams_of or method) in BASELINES else "-")


def time_method(dataset: str, method: str, params: dict, epochs: int, device: torch.device,
                seeds: int | None = None) -> float:
    """Table B.8's measure of one method, in this process: ms per epoch of one seed (training
    step + eval pass; ``seeds`` None), or ms per seed-epoch of one batched chunk of ``seeds``."""
    graph = bench_graph(dataset, config.hparams_for(params, dataset))
    hp = dict(config.hparams_for(params, dataset, method), early_stop_window=0, epochs=epochs)
    if not has_real_graph(dataset):
        hp["split"] = "per_class"
    if seeds is None:
        train_seed(graph, dict(hp, epochs=1), 0, device, method)  # warm-up (and GDC's matrix)
        return train_seed(graph, hp, 0, device, method)["ms_per_seed_epoch"]
    train_chunk(graph, dict(hp, epochs=1), list(range(seeds)), device, method)
    return train_chunk(graph, hp, list(range(seeds)), device, method)[0]["ms_per_seed_epoch"]


def time_rival(dataset: str, method: str, params: dict, epochs: int, device: torch.device, seeds: int,
               plain: bool) -> float | None:
    """ms per seed-epoch of ``method``'s batched engine on ``seeds`` seeds, or (``plain``) of its
    plain version (None: it has none)."""
    if not plain:
        return time_method(dataset, method, params, epochs, device, seeds)
    graph = bench_graph(dataset, config.hparams_for(params, dataset))
    hp = config.hparams_for(params, dataset, method)
    masks = ((graph["train_mask"], graph["val_mask"]) if graph["train_mask"] is not None
             else per_class_split(graph["y"], graph["num_classes"], 20, 30, 0)[:2])
    return time_plain(method, graph, hp, masks, epochs, seeds, device)


def measure_rivals(dataset: str, params: dict, epochs: int, device: torch.device, methods: list[str],
                   timeout_s: float | None = None) -> list[dict]:
    """Each batchable baseline of ``methods``, and CAD-Net, at RIVAL_SEEDS seeds and at one, ours
    and plain, each measurement in a process of its own where ``timeout_s`` is given."""
    run = in_process if timeout_s is None else partial(isolated, timeout_s=timeout_s)
    rows = []
    for method in methods:
        measured = method in BASELINES or method == "cadnet"  # CAD-Net: its plain version is its hardware yardstick
        batched = measured and REGISTRY[method].batched_for(config.hparams_for(params, dataset, method))
        if not measured or not (batched or method in EXAMPLES):
            continue
        row, notes = {"method": method, f"ours_{RIVAL_SEEDS}": None, f"plain_{RIVAL_SEEDS}": None}, []
        row["implementation"] = implementation(params, dataset, method)
        for seeds in (RIVAL_SEEDS, 1) if batched else (1,):  # PyG's examples: one seed
            for who in ("ours", "plain"):
                row[f"{who}_{seeds}"], why = run(time_rival, (dataset, method, params, epochs, device, seeds, who == "plain"))
                if why is not None:
                    notes.append(f"{who}, {seeds} seed(s): {why}")
        row["note"] = "; ".join(notes)
        rows.append(row)
        print(f"{dataset}/{method}: {RIVAL_SEEDS} seeds ours {_ms(row[f'ours_{RIVAL_SEEDS}'])} plain "
              f"{_ms(row[f'plain_{RIVAL_SEEDS}'])} ms/seed-epoch; one seed ours {_ms(row['ours_1'])} plain "
              f"{_ms(row['plain_1'])}{' ' + row['note'] if notes else ''}", flush=True)
    return rows


def isolated(function, args: tuple, timeout_s: float) -> tuple[object, str | None]:
    """``function(*args)`` in a spawned process of its own: ``(result, None)``, or ``(None, why)``
    where it raised, ran past ``timeout_s`` or was killed. A cell the paper marks OOM can take
    more memory than the machine has; the kernel then kills the process with SIGKILL, which no
    Python code can catch, so the benchmark keeps its figures only if that process is not its own
    (the child asks to be the kernel's first choice)."""
    context = get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_send_result, args=(send, function, args), daemon=True)
    child.start()
    send.close()  # the child holds the only sending end: its death ends the pipe
    try:
        if not receive.poll(timeout_s):
            child.kill()
            return None, f"stopped after {timeout_s:.0f} s"
        try:
            result, error = receive.recv()
        except EOFError:
            child.join()
            if child.exitcode == -signal.SIGKILL:
                return None, "killed (out of memory)"
            return None, f"died (exit code {child.exitcode})"
        return (result, None) if error is None else (None, error)
    finally:
        child.join(5)
        receive.close()


def exit_on_sigterm() -> None:
    """A plain ``kill`` (SIGTERM, also what a closing terminal or a job scheduler sends) ends the bench as an exit, not at
    once: Python's exit then stops the daemonic child that :func:`isolated` measures in. Without
    it a killed bench leaves its child measuring (seen: 6.9 GB and a core, until killed by hand)."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def _send_result(send, function, args: tuple) -> None:
    try:
        Path("/proc/self/oom_score_adj").write_text("1000")
    except OSError:
        pass  # not Linux: the kernel chooses as it will
    try:
        send.send((function(*args), None))
    except Exception as err:
        message = str(err).splitlines()[0][:120] if str(err) else ""
        memory = "out of memory, " if is_out_of_memory(err) else ""  # the allocator refused: no kill needed
        send.send((None, f"{memory}{type(err).__name__}: {message}"))


def in_process(function, args: tuple) -> tuple[object, str | None]:
    return function(*args), None


def measure_methods(dataset: str, params: dict, epochs: int, device: torch.device,
                    methods: list[str] | None = None, timeout_s: float | None = None) -> list[dict]:
    """Table B.8's measure for ``methods`` (default: every registry method) on one dataset, in
    one run: ms per epoch of one seed (training step + eval pass) and ms per seed-epoch batched
    (one chunk of the automatic size), with the ratios to APPNP's measured in the same run (only
    ratios carry across machines). With ``timeout_s`` each measurement runs in a process of its
    own (:func:`isolated`): one that fails, runs too long or is killed for memory becomes a note
    in its row, and a chunk out of memory (killed, or refused by the allocator) is tried again at
    half its size."""
    graph = bench_graph(dataset, config.hparams_for(params, dataset))
    chunks = {}
    for method in methods or TIMED_BY_DEFAULT:
        hp = dict(config.hparams_for(params, dataset, method), early_stop_window=0, epochs=epochs)
        chunks[method] = chunk_size(graph, hp, params, RUNS) if REGISTRY[method].batched_for(hp) else None
    del graph  # the measuring process loads its own
    run = in_process if timeout_s is None else partial(isolated, timeout_s=timeout_s)
    rows = []
    for method, S in chunks.items():
        single, single_note = run(time_method, (dataset, method, params, epochs, device))
        batched, notes = None, [] if single_note is None else [f"one seed: {single_note}"]
        while S is not None:
            batched, why = run(time_method, (dataset, method, params, epochs, device, S))
            if why is None:
                break
            notes.append(f"chunk of {S}: {why}")
            S = S // 2 if "out of memory" in why and S > 1 else None
        rows.append({"method": method, "implementation": implementation(params, dataset, method), "single": single,
                     "batched": batched, "chunk": S, "note": "; ".join(notes)})
        print(f"{dataset}/{method}: one seed {_ms(single)} ms/epoch, batched {_ms(batched)} ms/seed-epoch "
              f"(chunk {S}){' ' + rows[-1]['note'] if notes else ''}", flush=True)
    return rows


def time_replicas(dataset: str, params: dict, epochs: int, device: torch.device, seeds: int) -> tuple[float, float]:
    """ms per replica-epoch of one batch of ``seeds`` replicas drawn from the β study's cells of
    CAD-Net on ``dataset`` (one seed of each cell in turn), and of one cell's chunk of as many
    seeds: what batching a study's cells together costs against a cell alone."""
    graph = bench_graph(dataset, config.hparams_for(params, dataset))
    study = params["studies"]["beta"]
    cells = [config.Cell("beta", dataset, "cadnet", (("beta", b),)) for b in study["grid"]["beta"]]
    hps = [dict(config.cell_hparams(params, cell), early_stop_window=0, epochs=epochs) for cell in cells]
    if not has_real_graph(dataset):
        hps = [dict(hp, split="per_class") for hp in hps]
    replicas = [Replica(hps[k % len(hps)], k // len(hps)) for k in range(seeds)]
    train_replicas(graph, [Replica(dict(r.hp, epochs=1), r.seed) for r in replicas], device)  # warm-up
    mixed = train_replicas(graph, replicas, device)[0]["ms_per_seed_epoch"]
    alone = train_chunk(graph, hps[0], list(range(seeds)), device)[0]["ms_per_seed_epoch"]
    return mixed, alone


def epochs_per_seed(dataset: str, method: str, params: dict, device: str) -> float:
    """Epochs a seed of the family ran in the committed run (early stopping ends most before the
    last), or where none ran, what its peers ran under the same rule or its configured epochs
    (:func:`plan.expected_epochs`)."""
    return float(plan.expected_epochs(dataset, method, params, device=device)[0])


def machine(device: torch.device) -> str:
    cpu = platform.processor() or "unknown CPU"
    if Path("/proc/cpuinfo").exists():
        names = [l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")]
        cpu = names[0] if names else cpu
    text = f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads)"
    if device.type == "cuda":
        text += f", GPU: {torch.cuda.get_device_name(device)}"
    return text


# --- the figures, kept per device and dataset ------------------------------------------------

def code_version() -> str:
    """The commit measured, ``+`` where the measured code (pipeline/) differs from it."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD") or "-"
    return commit + ("+" if git("status", "--porcelain", "--", "pipeline") else "")


def read_figures(device_type: str, root: Path = BENCH_ROOT) -> dict[str, dict]:
    """Every recorded section on ``device_type``: ``{dataset: {section: entry}}``."""
    return {path.stem: _read_sections(path) for path in sorted((root / device_type).glob("*.json"))}


def _read_sections(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a figures file ({err}); delete it and measure again") from err


STAMP = ("date", "commit", "machine", "epochs")


def record(device_type: str, dataset: str, section: str, figures, epochs: int, machine_text: str,
           root: Path = BENCH_ROOT) -> None:
    """Store one section's figures for one dataset, with when, at which commit and on what they
    were measured; the dataset's other sections stay as they were. The rivals section is kept
    row by row (each row's ratio is measured within it): a method measured again replaces its
    row, and the rows of the methods not measured now stay, each with the stamp it was measured
    under (``measured``), so one method can be timed again alone."""
    path = bench_file(device_type, dataset, root)
    entries = _read_sections(path) if path.exists() else {}
    if section == "rivals" and section in entries:
        figures = _merged_rows(entries[section], figures)
    entries[section] = {"figures": figures, "date": time.strftime("%Y-%m-%d"), "commit": code_version(),
                        "machine": machine_text, "epochs": epochs}
    write_text_atomic(path, json.dumps(entries, indent=1, sort_keys=True) + "\n")


def _merged_rows(old_entry: dict, rows: list[dict]) -> list[dict]:
    """``old_entry``'s rows with those of ``rows``' methods replaced (in place; new methods
    last); a kept row carries the stamp of the run that measured it."""
    new = {r["method"]: r for r in rows}
    kept = [new.pop(r["method"]) if r["method"] in new
            else dict(r, measured=r.get("measured") or {k: old_entry[k] for k in STAMP})
            for r in old_entry["figures"]]
    return kept + list(new.values())


# --- the report -------------------------------------------------------------------------------

def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(value: float | None, appnp: float | None) -> str:
    return "-" if value is None or not appnp else f"{value / appnp:.2f}"


def _speedup(single: float | None, batched: float | None) -> float | None:
    return None if single is None or not batched else single / batched


def engine_tables(engines: dict[str, dict], memory: dict[str, float]) -> list[str]:
    """CAD-Net's engines against APPNP and the authors' setup, and the chunk's peak memory."""
    lines = [
        "", "## CAD-Net's engines", "",
        "(a) one seed at a time, (b) the batched engine (one chunk of seeds at once), (c) PyG's APPNP",
        "(K=10, α=0.1, hidden 64) one seed at a time, (d) the authors' setup (one seed at a time, the",
        "dense feature matrix, PyG message passing); 100 seeds implied at the paper's epochs:", "",
        "| dataset | (a) single ms | (b) batched ms | (c) APPNP ms | (d) authors' setup ms | b/a | b/c | d/b | chunk "
        "| (a) 100 seeds | (b) 100 seeds | (c) 100 seeds | (d) 100 seeds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in engines.values():
        lines.append(
            f"| {r['dataset']} | {r['single_ms']:.2f} | {r['batched_ms']:.2f} | {r['appnp_ms']:.2f} | "
            f"{r['authors_ms']:.2f} | {r['batched_ms'] / r['single_ms']:.3f} | {r['batched_ms'] / r['appnp_ms']:.3f} | "
            f"{r['authors_ms'] / r['batched_ms']:.1f} | {r['chunk']} | {r['single_100_s']:.0f} s | "
            f"{r['batched_100_s']:.0f} s | {r['appnp_100_s']:.0f} s | {r['authors_100_s']:.0f} s |")
    lines += ["", "Peak memory of one chunk of the automatic size (training step, float32; measured: extra",
              "RSS over the loaded graph in a fresh process on CPU, the allocator's peak on CUDA):", "",
              "| dataset | auto chunk (budget) | estimated, that chunk | measured, that chunk | estimated, 100 seeds |",
              "|---|---|---|---|---|"]
    for name, r in engines.items():
        measured = f"{memory[name]:.2f} GiB" if name in memory else "- (synthetic)"
        lines.append(f"| {r['dataset']} | {r['chunk']} | {r['estimate_chunk_gb']:.2f} GiB | {measured} | "
                     f"{r['estimate_100_gb']:.2f} GiB |")
    return lines


def methods_table(dataset: str, rows: list[dict]) -> list[str]:
    paper = load_paper()["ms_per_epoch"]
    appnp = next((r for r in rows if r["method"] == "appnp"), {"single": None, "batched": None})
    lines = ["", f"## Every method on {dataset}", "",
             "Table B.8's measure, one run: ms per epoch of one seed (the method's one-seed network, the loop's",
             "readable reference, PyG's layers as the paper timed them), ms per seed-epoch batched (one chunk, in",
             "the implementation named: params.yaml's, or with `--sparse` the sparse one where it has one), each",
             "over APPNP's in the same run, the batched speed-up (one seed's ms over batched ms per seed), and",
             "the paper's GTX 1080 Ti figure over its APPNP figure:", "",
             "| method | implementation | one seed ms | / APPNP | batched ms / seed | / APPNP batched | speed-up batched "
             "| chunk | paper ms | paper / APPNP | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    paper_appnp = paper.get("appnp", {}).get(dataset)
    for r in rows:
        theirs = paper.get(r["method"], {}).get(dataset)
        theirs_ratio = (f"{theirs / paper_appnp:.2f}" if isinstance(theirs, float) and paper_appnp else "-")
        speedup = _speedup(r["single"], r["batched"])
        lines.append(f"| {r['method']} | {r.get('implementation', '-')} | {_ms(r['single'])} | "
                     f"{_ratio(r['single'], appnp['single'])} | "
                     f"{_ms(r['batched'])} | {_ratio(r['batched'], appnp['batched'])} | "
                     f"{'-' if speedup is None else f'{speedup:.1f}x'} | {r['chunk'] or '-'} | "
                     f"{theirs if theirs is not None else '-'} | {theirs_ratio} | {r.get('note') or ''} |")
    return lines


def replicas_lines(replicas: dict[str, dict]) -> list[str]:
    lines = ["", "## Replicas across settings", "",
             "The β study's cells of CAD-Net as replicas of one batch (one seed of each cell in turn) against one",
             "cell's chunk of as many seeds, ms per replica-epoch:", "",
             "| dataset | replicas | β cells batched | one cell | ratio |", "|---|---|---|---|---|"]
    for dataset, r in replicas.items():
        lines.append(f"| {dataset} | {r['seeds']} | {r['mixed']:.2f} | {r['alone']:.2f} | {r['mixed'] / r['alone']:.2f} |")
    return lines


def remaining_seconds(params: dict, methods: dict[str, list[dict]], device_type: str,
                      runs: int = RUNS) -> dict[str, list]:
    """What is left of the paper on the measured datasets, by study: ``[cells, seeds to go,
    seconds, cells without a figure]``, each short cell costed at its seeds to go times its
    method's ms per seed-epoch in the network its cells train (:func:`plan.training_ms`) times
    the epochs a seed of its family ran in the committed run (its peers' under the same rule, or
    its configured epochs, where none ran)."""
    speed = {(dataset, r["method"]): plan.training_ms(r, dataset, params)
             for dataset, rows in methods.items() for r in rows}
    studies: dict[str, list] = {}
    for job in queue.plan_jobs(params, runs, device_type):
        if job.cell.dataset not in methods:
            continue
        row = studies.setdefault(job.cell.study, [0, 0, 0.0, 0])
        ms = speed.get((job.cell.dataset, REGISTRY[job.cell.method].hparams_of or job.cell.method))
        row[0] += 1
        row[1] += job.to_go
        if ms is None:
            row[3] += 1
        else:
            row[2] += ms * epochs_per_seed(job.cell.dataset, job.cell.method, params, device_type) * job.to_go / 1000
    return studies


def remaining_lines(studies: dict[str, list], datasets: list[str], runs: int) -> list[str]:
    lines = ["", f"## What is left of the paper at {runs} seeds a cell", "",
             f"On {', '.join(datasets)}: every cell short of {runs} seeds, its seeds to go x its method's ms per",
             "seed-epoch above x the epochs a seed of its family ran in the committed run (where none ran, the",
             "median of the dataset's families run under the same epochs and stopping rule, else its configured",
             "epochs):", "", "| study | cells | seeds to go | implied time | cells without a figure |", "|---|---|---|---|---|"]
    for study, (cells, to_go, seconds, unknown) in studies.items():
        lines.append(f"| {study} | {cells} | {to_go} | {duration(seconds)} | {unknown} |")
    total = [sum(row[k] for row in studies.values()) for k in range(4)]
    lines.append(f"| all | {total[0]} | {total[1]} | {duration(total[2])} | {total[3]} |")
    return lines


def goals_table(device_type: str, engines: dict[str, dict], methods: dict[str, list[dict]],
                rivals: dict[str, list[dict]], remaining: dict[int, dict[str, list]]) -> list[str]:
    """The speed goals, each with the figure measured on this device beside it."""
    lines = ["", "## Goals", "", "| goal | measured | target | met |", "|---|---|---|---|"]

    def row(goal: str, value: float | None, shown: str, target: float, target_text: str):
        met = "-" if value is None else ("yes" if value >= target else "no")
        lines.append(f"| {goal} | {shown if value is not None else 'not measured'} | {target_text} | {met} |")

    cora = engines.get("cora")
    d_over_b = None if cora is None else cora["authors_ms"] / cora["batched_ms"]
    target = GOAL_VS_AUTHORS.get(device_type, GOAL_VS_AUTHORS["cpu"])
    row("CAD-Net on Cora, batched, per seed against the authors' setup (d/b)", d_over_b,
        f"{d_over_b:.1f}x" if d_over_b else "", target, f"≥ {target}x")
    for dataset, rows in rivals.items():
        for r in rows:
            example = r["method"] in EXAMPLES  # PyG's example trains one seed at a time: against it
            goals = [(1, 1, "one seed, PyG's example's ms per epoch over ours")] if example else [
                (RIVAL_SEEDS, RIVAL_SEEDS, f"{RIVAL_SEEDS} seeds, a plain version's ms per seed-epoch over ours")]
            if example and r[f"ours_{RIVAL_SEEDS}"] is not None:  # batched (AGNN's sparse network)
                goals.append((RIVAL_SEEDS, 1, f"{RIVAL_SEEDS} seeds batched, PyG's example's ms per epoch (one seed at "
                                              f"a time) over our ms per seed-epoch"))
            for seeds, plain_seeds, what in goals:
                ours, plain = r[f"ours_{seeds}"], r[f"plain_{plain_seeds}"]
                ratio = None if ours is None or plain is None else plain / ours
                goal = f"{r['method']} on {dataset}, {what}"
                if plain is None and ours is not None:
                    lines.append(f"| {goal} | no plain version in the bench | ≥ {GOAL_VS_PLAIN:g}x | - |")
                else:
                    row(goal, ratio, f"{ratio:.2f}x" if ratio else "", GOAL_VS_PLAIN, f"≥ {GOAL_VS_PLAIN:g}x")
    for target_device, (runs, goal_s) in GOAL_REMAINING_S.items():
        if runs not in remaining:
            continue
        seconds = sum(r[2] for r in remaining[runs].values())
        unknown = sum(r[3] for r in remaining[runs].values())
        shown = duration(seconds) + (f" (+{unknown} cells without a figure)" if unknown else "")
        target = f"≤ {duration(goal_s)} " + ("on one H200" if target_device == "cuda" else "of this CPU")
        here = device_type == target_device
        met = ("yes" if seconds <= goal_s and not unknown else "no") if here else "-"
        lines.append(f"| what is left of the paper on {', '.join(methods)}, {runs} seeds a cell | {shown} | "
                     f"{target}{'' if here else ' (here for scale)'} | {met} |")
    return lines


def rivals_table(dataset: str, rows: list[dict]) -> list[str]:
    lines = ["", f"## The baselines and CAD-Net against plain versions on {dataset}", "",
             f"ms per seed-epoch of our network (its implementation: params.yaml's, or with `--sparse` the sparse",
             f"one where a method has it) and of a plain PyTorch version of the same network",
             f"(pipeline/bench_plain.py), at {RIVAL_SEEDS} seeds and at one, each row measured in one run; ratio = plain / "
             "ours (above 1: ours is faster). Graph U-Net trains one seed at a time, and so does AGNN's `vmap`",
             "implementation (PyG's AGNNConv does not run under vmap): against PyG's example of the network",
             "(examples/graph_unet.py, examples/agnn.py), one seed:", "",
             f"| method | implementation | ours, {RIVAL_SEEDS} seeds | plain, {RIVAL_SEEDS} seeds | ratio | ours, one seed "
             "| plain, one seed | ratio | note |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = []
        for seeds in (RIVAL_SEEDS, 1):
            ours, plain = r[f"ours_{seeds}"], r[f"plain_{seeds}"]
            cells += [_ms(ours), _ms(plain), "-" if ours is None or plain is None else f"{plain / ours:.2f}"]
        lines.append(f"| {r['method']} | {r.get('implementation', '-')} | {' | '.join(cells)} | {r.get('note') or ''} |")
    return lines


def with_sparse(params: dict, datasets: list[str]) -> dict:
    """``params`` with every baseline that has a sparse network set to it on ``datasets``."""
    params = copy.deepcopy(params)
    for method in BASELINES:
        if "implementation" in REGISTRY[method].optional_keys:
            for dataset in datasets:
                params["method_hparams"][method].setdefault(dataset, {})["implementation"] = "sparse"
    return params


def provenance_lines(figures: dict[str, dict]) -> list[str]:
    lines = ["", "## Where each figure came from", "",
             "| dataset | section | date | commit | machine | timed epochs |", "|---|---|---|---|---|---|"]
    for dataset, sections in figures.items():
        for section in SECTIONS:
            if section not in sections:
                continue
            e = sections[section]
            stamps = {}  # a section kept row by row: one line per run, naming its rows
            for r in e["figures"] if isinstance(e["figures"], list) else []:
                stamp = tuple((r.get("measured") or e)[k] for k in STAMP)
                stamps.setdefault(stamp, []).append(r["method"])
            if len(stamps) < 2:
                stamps = {tuple(e[k] for k in STAMP): None}
            for (date, commit, machine_text, epochs), methods in stamps.items():
                name = section if methods is None else f"{section}: {', '.join(methods)}"
                lines.append(f"| {dataset} | {name} | {date} | {commit} | {machine_text} | {epochs} |")
    return lines


def report(device_type: str, params: dict, root: Path = BENCH_ROOT) -> str:
    """The device's page, from every figure recorded for it."""
    figures = read_figures(device_type, root)

    def section(name: str) -> dict:
        return {d: s[name]["figures"] for d, s in figures.items() if name in s}

    engines, memory, methods = section("engines"), section("memory"), section("methods")
    replicas, profiles, rivals = section("replicas"), section("profile"), section("rivals")
    remaining = ({runs: remaining_seconds(params, methods, device_type, runs)
                  for runs in sorted({goal[0] for goal in GOAL_REMAINING_S.values()}, reverse=True)}
                 if methods else {})
    lines = [f"# Benchmark on {device_type.upper()}", "",
             f"Generated by `python -m pipeline.bench` from the figures in `{root / device_type}/` (one file per",
             "dataset; every section keeps its date, commit and machine, listed at the end); `--report-only`",
             "rewrites this page from them. ms per seed-epoch = one training step plus the eval-mode pass,",
             "median over the timed epochs after a warm-up; batched = the chunk's epoch time over its seeds.",
             "Only ratios measured in one run carry across machines."]
    lines += goals_table(device_type, engines, methods, rivals, remaining)
    if engines:
        lines += engine_tables(engines, {d: m["gib"] for d, m in memory.items()})
    for dataset, rows in methods.items():
        lines += methods_table(dataset, rows)
    for dataset, rows in rivals.items():
        lines += rivals_table(dataset, rows)
    if replicas:
        lines += replicas_lines(replicas)
    for runs, studies in remaining.items():
        lines += remaining_lines(studies, list(methods), runs)
    for dataset, p in profiles.items():
        lines += ["", f"## Profile on {dataset}", "",
                  f"The batched engine: one chunk of {RUNS} seeds, {PROFILE_EPOCHS} epochs (training step + eval pass",
                  "each), building the stacked model and sparse layouts included once:", "", "```", p["text"], "```"]
    lines += provenance_lines(figures)
    return "\n".join(lines + [""])


def report_file(device_type: str) -> Path:
    return BENCH_REPORT.with_name(BENCH_REPORT.name.format(device=device_type))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs per measurement")
    parser.add_argument("--datasets", nargs="*", default=list(config.DATASETS),
                        help="datasets of CAD-Net's engines, memory and (Cora) profile sections (none: skip them)")
    parser.add_argument("--methods-on", nargs="*", default=["cora"],
                        help="datasets on which to time every registry method, one seed and batched, and the "
                             "β study's replicas (none: skip)")
    parser.add_argument("--methods", nargs="+", default=list(TIMED_BY_DEFAULT),
                        help="registry methods timed on the --methods-on datasets (default: all but those "
                             "that read another's settings, e.g. mixhop_l2: MixHop's network, MixHop's time)")
    parser.add_argument("--rivals-on", nargs="*", default=["cora", "pubmed"],
                        help="datasets on which to time each batchable baseline of --methods at 25 seeds and at "
                             "one beside a plain version of its network (none: skip)")
    parser.add_argument("--sparse", action="store_true",
                        help="time each baseline's sparse network where it has one, whatever params.yaml selects "
                             "(the methods and rivals sections)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds each method's measurement may take (in a process of its own) before it is stopped")
    parser.add_argument("--report-only", action="store_true",
                        help="measure nothing: rewrite the device's report from its recorded figures")
    args = parser.parse_args(argv)
    for name in args.datasets + args.methods_on + args.rivals_on:
        config.check_choice("datasets", name, config.DATASETS)
    for name in args.methods:
        config.check_choice("methods", name, tuple(REGISTRY))
    if not args.timeout > 0:
        raise config.ConfigError(f"--timeout: got {args.timeout}; allowed values: seconds > 0")
    params = config.load_params()
    device = torch.device(resolve_device_name(params.get("device", "auto")))
    out = report_file(device.type)
    if args.report_only:
        write_text_atomic(out, report(device.type, params, BENCH_ROOT))
        print(f"{out}: rewritten from {BENCH_ROOT / device.type}/")
        return
    exit_on_sigterm()
    who = machine(device)

    def keep(dataset: str, section: str, figures) -> None:  # each section lands as it is measured
        record(device.type, dataset, section, figures, args.epochs, who, BENCH_ROOT)
        write_text_atomic(out, report(device.type, params, BENCH_ROOT))

    for dataset in args.datasets:
        r = measure(dataset, params, args.epochs, device)
        print(f"{r['dataset']}: single {r['single_ms']:.2f} ms, batched {r['batched_ms']:.2f} ms/seed-epoch "
              f"(chunk {r['chunk']}), APPNP {r['appnp_ms']:.2f} ms; b/a {r['batched_ms'] / r['single_ms']:.3f}, "
              f"b/c {r['batched_ms'] / r['appnp_ms']:.3f}; authors' setup {r['authors_ms']:.2f} ms "
              f"(d/b {r['authors_ms'] / r['batched_ms']:.1f})", flush=True)
        keep(dataset, "engines", r)
        if has_real_graph(dataset):
            keep(dataset, "memory", {"gib": measured_peak_gb(dataset, r["chunk"], device)})
            if dataset == "cora":
                keep(dataset, "profile", {"text": profile_epoch(params, device)})
    for dataset in args.methods_on:
        timed = with_sparse(params, [dataset]) if args.sparse else params
        keep(dataset, "methods", measure_methods(dataset, timed, args.epochs, device, args.methods, args.timeout))
        hp = config.hparams_for(params, dataset)
        seeds = chunk_size(bench_graph(dataset, hp), hp, params, RUNS)
        mixed, alone = time_replicas(dataset, params, args.epochs, device, seeds)
        keep(dataset, "replicas", {"mixed": mixed, "alone": alone, "seeds": seeds})
    for dataset in args.rivals_on:
        timed = with_sparse(params, [dataset]) if args.sparse else params
        keep(dataset, "rivals", measure_rivals(dataset, timed, args.epochs, device, args.methods, args.timeout))
    print(f"{out}: written from {BENCH_ROOT / device.type}/")


if __name__ == "__main__":
    config.run_main(main)
