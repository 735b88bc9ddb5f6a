"""Benchmark: ``python -m pipeline.bench [--epochs N] [--datasets ...] [--out reports/bench.md]``.

Not a test and not a DVC stage: it prints figures measured in one run on the current device
(CUDA when present) and writes them to ``reports/bench.md``:
(a) the single-seed path (:func:`pipeline.engine.loop.train_seed`, one seed at a time),
(b) the batched engine (:func:`pipeline.engine.loop.train_chunk`, a chunk of seeds at once),
(c) PyG's APPNP (K=10, alpha=0.1, hidden 64) trained one seed at a time with the same loop,
(d) the authors' setup: one seed at a time, the dense feature matrix, PyG message passing (the
single-seed network of (a) fed ``X`` dense, as their demo scripts feed it; written here from
docs/SPEC.md, not their code),
as ms per seed-epoch (a training step plus the eval-mode pass), the wall time they imply for
100 seeds at the paper's epochs (no early stopping), and the ratios b/a, b/c and d/b (the
batched engine's speed-up over the authors' setup).

Every dataset whose graph ``dvc repro`` (or ``python -m pipeline.preprocess <dataset>``) has
written to ``data/processed`` is measured on its real graph; a dataset without one on a random
graph of its node, edge, feature and class counts (docs/SPEC.md), labelled "(synthetic)".
Also: peak memory of one chunk of the automatic size, measured and estimated, per dataset, and
a profile of one batched epoch on Cora.

With ``--methods-on``, two more sections: the β study's cells of CAD-Net trained as replicas of
one batch against one cell's chunk of the same size (ms per replica-epoch), and what is left of
the paper at this run's figures: every cell short of 100 seeds on a measured dataset
(:func:`pipeline.queue.plan_jobs`), its seeds to go times its method's batched ms per seed-epoch
(one seed's where it has no batched form) times the epochs a seed of its family ran in the
committed run (the paper's epochs where none ran), summed by study.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import signal
import statistics
import sys
import time
from functools import partial
from multiprocessing import get_context
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.nn import APPNP

from pipeline import config, queue
from pipeline.engine import plan
from pipeline.progress import duration
from pipeline.models.adacad_batched import estimate_peak_bytes
from pipeline.models import REGISTRY
from pipeline.paths import PROCESSED_ROOT
from pipeline.preprocess import load_graph
from pipeline.engine.splits import per_class_split
from pipeline.stats import load_paper
from pipeline.engine.loop import Replica, make_optimizer, train_chunk, train_replicas, train_seed
from pipeline.train import chunk_size, graph_sizes, in_fresh_processes, is_out_of_memory, resolve_device

# an entry that reads another's settings (mixhop_l2) runs that one's network: its time is that one's
TIMED_BY_DEFAULT = tuple(name for name, entry in REGISTRY.items() if not entry.hparams_of)

# Stored feature entries per node assumed for the synthetic stand-ins (their files are not here).
ASSUMED_NNZ_PER_NODE = {"pubmed": 50, "computers": 260, "photo": 260, "cs": 50, "physics": 50}
RUNS = 100
PROFILE_EPOCHS = 5


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
    base, peak = next(in_fresh_processes(_peak_rss_of_batch, [(dataset, seeds)], workers=1))
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
        chunks[method] = chunk_size(graph, hp, params, RUNS) if REGISTRY[method].batched else None
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
        rows.append({"method": method, "single": single, "batched": batched, "chunk": S, "note": "; ".join(notes)})
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
    last), or the paper's epochs where none ran."""
    ran = plan.epochs_per_seed(dataset, method, device=device)
    return ran if ran is not None else float(config.hparams_for(params, dataset, method)["epochs"])


def remaining_table(params: dict, measured: dict[str, list[dict]], device: torch.device) -> list[str]:
    """What is left of the paper on the measured datasets, at this run's figures, by study."""
    speed = {(dataset, r["method"]): r["batched"] if r["batched"] is not None else r["single"]
             for dataset, rows in measured.items() for r in rows}
    jobs = [j for j in queue.plan_jobs(params, RUNS, device.type) if j.cell.dataset in measured]
    studies: dict[str, list] = {}
    for job in jobs:
        ms = speed.get((job.cell.dataset, REGISTRY[job.cell.method].hparams_of or job.cell.method))
        seconds = None if ms is None else ms * epochs_per_seed(job.cell.dataset, job.cell.method, params, device.type) * job.to_go / 1000
        studies.setdefault(job.cell.study, []).append((job, seconds))
    lines = ["", f"What is left of the paper on {', '.join(measured)} at these figures: every cell short of {RUNS}",
             "seeds, its seeds to go x its method's ms per seed-epoch above x the epochs a seed of its family ran in",
             "the committed run (the paper's where none ran):", "",
             "| study | cells | seeds to go | implied time | cells without a figure |", "|---|---|---|---|---|"]
    total = 0.0
    for study, rows in studies.items():
        known = [s for _, s in rows if s is not None]
        total += sum(known)
        lines.append(f"| {study} | {len(rows)} | {sum(j.to_go for j, _ in rows)} | {duration(sum(known))} | "
                     f"{len(rows) - len(known)} |")
    lines.append(f"| all | {len(jobs)} | {sum(j.to_go for j in jobs)} | {duration(total)} | "
                 f"{sum(s is None for rows in studies.values() for _, s in rows)} |")
    return lines


def replicas_lines(replicas: dict[str, tuple[float, float, int]]) -> list[str]:
    lines = ["", "The β study's cells of CAD-Net as replicas of one batch (one seed of each cell in turn) against one",
             "cell's chunk of as many seeds, ms per replica-epoch:", "",
             "| dataset | replicas | β cells batched | one cell | ratio |", "|---|---|---|---|---|"]
    for dataset, (mixed, alone, seeds) in replicas.items():
        lines.append(f"| {dataset} | {seeds} | {mixed:.2f} | {alone:.2f} | {mixed / alone:.2f} |")
    return lines


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def methods_table(dataset: str, rows: list[dict]) -> list[str]:
    paper = load_paper()["ms_per_epoch"]
    appnp = next((r for r in rows if r["method"] == "appnp"), {"single": None, "batched": None})
    lines = ["", f"Every method of the registry on {dataset} (Table B.8's measure), one run: ms per epoch of one",
             "seed, ms per seed-epoch batched (one chunk), each over APPNP's in the same run, and the",
             "paper's GTX 1080 Ti figure over its APPNP figure:", "",
             "| method | one seed ms | / APPNP | batched ms / seed | / APPNP batched | chunk | paper ms | paper / APPNP | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    paper_appnp = paper.get("appnp", {}).get(dataset)
    for r in rows:
        theirs = paper.get(r["method"], {}).get(dataset)
        theirs_ratio = (f"{theirs / paper_appnp:.2f}" if isinstance(theirs, float) and paper_appnp else "-")
        lines.append(f"| {r['method']} | {_ms(r['single'])} | {_ratio(r['single'], appnp['single'])} | "
                     f"{_ms(r['batched'])} | {_ratio(r['batched'], appnp['batched'])} | {r['chunk'] or '-'} | "
                     f"{theirs if theirs is not None else '-'} | {theirs_ratio} | {r.get('note') or ''} |")
    return lines


def _ratio(value: float | None, appnp: float | None) -> str:
    return "-" if value is None or not appnp else f"{value / appnp:.2f}"


def machine(device: torch.device) -> str:
    cpu = platform.processor() or "unknown CPU"
    if Path("/proc/cpuinfo").exists():
        names = [l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")]
        cpu = names[0] if names else cpu
    text = f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads)"
    if device.type == "cuda":
        text += f", GPU: {torch.cuda.get_device_name(device)}"
    return text


def report(rows: list[dict], memory: dict, profile_text: str | None, device: torch.device, epochs: int,
           variants: dict[str, list[dict]], extra: list[str] = ()) -> str:
    lines = [
        f"## {device.type.upper()}: {machine(device)}",
        "",
        f"Generated by `python -m pipeline.bench` on {time.strftime('%Y-%m-%d')}. ms per seed-epoch = one training",
        f"step plus the eval-mode pass, median over {epochs} epochs after a warm-up; batched = the",
        "chunk's epoch time divided by its seeds. Wall times for 100 seeds are implied by those",
        "figures at the paper's epochs without early stopping (early stopping only shortens them).",
    ]
    if rows:
        lines += engine_tables(rows, memory)
    for dataset, method_rows in variants.items():
        lines += methods_table(dataset, method_rows)
    lines += list(extra)
    if profile_text is not None:
        lines += ["", f"Profile of the batched engine on Cora: one chunk of 100 seeds, {PROFILE_EPOCHS} epochs (training step",
                  "+ eval pass each), building the stacked model and sparse layouts included once:", "",
                  "```", profile_text, "```"]
    return "\n".join(lines + [""])


def engine_tables(rows: list[dict], memory: dict) -> list[str]:
    """CAD-Net's engines against APPNP and the authors' setup, and the chunk's peak memory."""
    lines = [
        "",
        "| dataset | (a) single ms | (b) batched ms | (c) APPNP ms | (d) authors' setup ms | b/a | b/c | d/b | chunk "
        "| (a) 100 seeds | (b) 100 seeds | (c) 100 seeds | (d) 100 seeds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['single_ms']:.2f} | {r['batched_ms']:.2f} | {r['appnp_ms']:.2f} | "
            f"{r['authors_ms']:.2f} | {r['batched_ms'] / r['single_ms']:.3f} | {r['batched_ms'] / r['appnp_ms']:.3f} | "
            f"{r['authors_ms'] / r['batched_ms']:.1f} | {r['chunk']} | {r['single_100_s']:.0f} s | "
            f"{r['batched_100_s']:.0f} s | {r['appnp_100_s']:.0f} s | {r['authors_100_s']:.0f} s |"
        )
    lines += ["", "Peak memory of one chunk of the automatic size (training step, float32; measured: extra",
              "RSS over the loaded graph in a fresh process on CPU, the allocator's peak on CUDA):", "",
              "| dataset | auto chunk (budget) | estimated, that chunk | measured, that chunk | estimated, 100 seeds |",
              "|---|---|---|---|---|"]
    for r in rows:
        name = r["dataset"].split()[0]
        measured = f"{memory[name]:.2f} GiB" if name in memory else "- (synthetic)"
        lines.append(f"| {r['dataset']} | {r['chunk']} | {r['estimate_chunk_gb']:.2f} GiB | {measured} | "
                     f"{r['estimate_100_gb']:.2f} GiB |")
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs per measurement")
    parser.add_argument("--datasets", nargs="*", default=list(config.DATASETS),
                        help="datasets of the engines table (none: skip it)")
    parser.add_argument("--methods-on", nargs="*", default=["cora"],
                        help="datasets on which to time every registry method, one seed and batched (none: skip)")
    parser.add_argument("--methods", nargs="+", default=list(TIMED_BY_DEFAULT),
                        help="registry methods timed on the --methods-on datasets (default: all but those "
                             "that read another's settings, e.g. mixhop_l2: MixHop's network, MixHop's time)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds each method's measurement may take (in a process of its own) before it is stopped")
    parser.add_argument("--out", type=Path, default=Path("reports/bench.md"))
    args = parser.parse_args(argv)
    for name in args.datasets + args.methods_on:
        config.check_choice("datasets", name, config.DATASETS)
    for name in args.methods:
        config.check_choice("methods", name, tuple(REGISTRY))
    if not args.timeout > 0:
        raise config.ConfigError(f"--timeout: got {args.timeout}; allowed values: seconds > 0")
    params = config.load_params()
    device = resolve_device(params.get("device", "auto"))
    exit_on_sigterm()

    rows = []
    for dataset in args.datasets:
        rows.append(measure(dataset, params, args.epochs, device))
        r = rows[-1]
        print(f"{r['dataset']}: single {r['single_ms']:.2f} ms, batched {r['batched_ms']:.2f} ms/seed-epoch "
              f"(chunk {r['chunk']}), APPNP {r['appnp_ms']:.2f} ms; b/a {r['batched_ms'] / r['single_ms']:.3f}, "
              f"b/c {r['batched_ms'] / r['appnp_ms']:.3f}; authors' setup {r['authors_ms']:.2f} ms "
              f"(d/b {r['authors_ms'] / r['batched_ms']:.1f})", flush=True)
    memory = {r["dataset"]: measured_peak_gb(r["dataset"], r["chunk"], device) for r in rows
              if not r["dataset"].endswith("(synthetic)")}
    profile_text = profile_epoch(params, device) if has_real_graph("cora") and "cora" in args.datasets else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    variants, replicas = {}, {}
    for dataset in args.methods_on:  # the report so far is written after each dataset: hours on a CPU
        variants[dataset] = measure_methods(dataset, params, args.epochs, device, args.methods, args.timeout)
        args.out.write_text(report(rows, memory, profile_text, device, args.epochs, variants))
    for dataset in args.methods_on:
        seeds = chunk_size(bench_graph(dataset, config.hparams_for(params, dataset)), config.hparams_for(params, dataset), params, RUNS)
        replicas[dataset] = (*time_replicas(dataset, params, args.epochs, device, seeds), seeds)
    extra = (replicas_lines(replicas) + remaining_table(params, variants, device)) if variants else []
    text = report(rows, memory, profile_text, device, args.epochs, variants, extra)
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    config.run_main(main)
