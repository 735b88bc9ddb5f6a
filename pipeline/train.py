"""Train stage: ``python -m pipeline.train <dataset> [<method>]``, and the one training loop
that every method of the registry (:mod:`pipeline.methods`) goes through.

Trains seeds ``0 .. runs-1`` of one (dataset, method) pair and keeps one file per seed in
``data/runs/<dataset>/<method>/seed_NNN.pt``. Each file records a fingerprint of what produced
it (hyperparameters, graph, code); the DVC stage declares the folder ``persist: true`` so an
interrupted run keeps its finished seeds, and a rerun with the same fingerprint trains only
the missing ones. Files with another fingerprint, or seeds beyond ``runs``, are removed.

The protocol follows the authors' code (SPEC.md), for every method: Adam with amsgrad,
weight decay on all parameters, a step learning-rate drop, one training step then one
eval-mode pass per epoch, the reported test accuracy is the one at the epoch of lowest
validation loss, and early stopping after ``epochs // 2`` when the validation loss exceeds
the mean of the previous ``early_stop_window`` epochs. The loss is the NLL on the training
nodes plus whatever terms the method's network returns (CAD-Net: its entropy regulariser).
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import math
import time
from pathlib import Path

import torch
from joblib import Parallel, delayed
from tqdm import tqdm

from pipeline import config
from pipeline.batched import estimate_peak_bytes, masked_accuracy, masked_nll
from pipeline.files import sha256_of, write_atomic
from pipeline.methods import REGISTRY
from pipeline.paths import PROCESSED_ROOT, RUNS_ROOT, seed_file
from pipeline.preprocess import load_graph
from pipeline.splits import split_masks

# Code whose change makes stored seeds stale (docstrings and comments aside: see code_fingerprint).
SOURCE_FILES = [Path(__file__).with_name(n) for n in ("model.py", "train.py", "batched.py", "splits.py",
                                                       "methods.py")]


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when present, so the same params run on a laptop or a GPU box."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise config.ConfigError("device: 'cuda' asked for but no CUDA device is available; "
                                 "allowed values here: auto, cpu")
    return torch.device(name)


def build_net(graph: dict, hp: dict, method: str, seeds: list[int], batched: bool) -> torch.nn.Module:
    """The method's network for ``seeds`` (its registry entry's builder). A method without a
    batched form trains seed by seed (``batched`` is then ignored)."""
    entry = REGISTRY[method]
    module, function = entry.builder.split(":")
    builder = getattr(importlib.import_module(module), function)
    return builder(graph, hp, seeds, batched and entry.batched)


def make_optimizer(params, hp: dict):
    """Adam(amsgrad) with weight decay on every parameter, and the step lr drop (or none)."""
    optimizer = torch.optim.Adam(params, lr=hp["lr"], weight_decay=hp["weight_decay"], amsgrad=True)
    scheduler = None
    if hp["lr_drop_every"] > 0:
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, hp["lr_drop_every"], hp["lr_drop_factor"])
    return optimizer, scheduler


def should_stop_early(val_losses: list[float], epoch: int, epochs: int, window: int) -> bool:
    """The authors' rule: past half the epochs, stop when this epoch's validation loss is
    greater than the mean of the previous ``window`` epochs' (the current one excluded)."""
    if window <= 0 or epoch <= epochs // 2:
        return False
    previous = val_losses[-(window + 1):-1]
    return bool(previous) and val_losses[-1] > sum(previous) / len(previous)


def train_chunk(graph: dict, hp: dict, seeds: list[int], device: torch.device | str = "cpu",
                method: str = "cadnet", batched: bool = True) -> list[dict]:
    """The one training loop: train ``seeds`` of ``method`` side by side and return one record
    per seed. Everything stays per seed: initial weights (the builder seeds them), dropout
    masks, splits, early stopping (a stopped seed's parameters are frozen while the others go
    on) and model selection. With ``batched=False`` (one seed: the readable reference) the
    network is the method's single-seed model; the records mean the same either way."""
    device = torch.device(device)
    if not batched and len(seeds) != 1:
        return [r for seed in seeds for r in train_chunk(graph, hp, [seed], device, method, batched=False)]
    S = len(seeds)
    net = build_net(graph, hp, method, seeds, batched).to(device)
    splits = [split_masks(graph, hp, seed) for seed in seeds]
    masks = [torch.stack([s[part] for s in splits], dim=1).to(device) for part in range(3)]
    y = graph["y"].to(device)
    torch.manual_seed(seeds[0])  # the chunk's dropout stream
    optimizer, scheduler = make_optimizer(net.parameters(), hp)

    parts = ("train", "val", "test")
    history = {f"{p}_{w}": [] for p in parts for w in ("loss", "acc")}  # per epoch: [S] tensors
    active = torch.ones(S, dtype=torch.bool, device=device)
    epochs_run = torch.zeros(S, dtype=torch.long)
    best_val = torch.full((S,), math.inf, device=device)
    best = {k: torch.zeros(S, device=device) for k in ("val_acc", "test_acc")}
    best_epoch = torch.zeros(S, dtype=torch.long, device=device)
    best_gamma = torch.zeros(graph["y"].size(0), S, device=device)

    start = time.perf_counter()
    epoch_bar = tqdm(range(1, hp["epochs"] + 1), desc=f"  seeds {seeds[0]}-{seeds[-1]}", unit="epoch", leave=False)
    for epoch in epoch_bar:
        net.train()
        optimizer.zero_grad()
        out = net()
        per_seed_loss = masked_nll(out.log_probs, y, masks[0]) + out.regularizer
        per_seed_loss.sum().backward()  # seed s's gradient is its own loss's
        stopped = (~active).nonzero().view(-1)
        saved = net.seed_slices(stopped) if stopped.numel() else None
        optimizer.step()
        if saved is not None:
            net.restore_seed_slices(stopped, saved)

        net.eval()
        with torch.no_grad():
            out = net()
            for part, mask in zip(parts, masks):
                history[f"{part}_loss"].append(masked_nll(out.log_probs, y, mask))
                history[f"{part}_acc"].append(masked_accuracy(out.log_probs, y, mask))
            val_loss = history["val_loss"][-1]
            improved = active & (val_loss < best_val)
            best_val = torch.where(improved, val_loss, best_val)
            for key in ("val_acc", "test_acc"):
                best[key] = torch.where(improved, history[key][-1], best[key])
            best_epoch = torch.where(improved, torch.full_like(best_epoch, epoch), best_epoch)
            best_gamma = torch.where(improved.view(1, -1), out.gamma, best_gamma)
        epochs_run[active.cpu()] = epoch

        val_history = torch.stack(history["val_loss"]).cpu()
        for s in active.nonzero().view(-1).tolist():
            if should_stop_early(val_history[:, s].tolist(), epoch, hp["epochs"], hp["early_stop_window"]):
                active[s] = False
        epoch_bar.set_postfix(active=int(active.sum()))
        if not active.any():
            break
        if scheduler is not None:
            scheduler.step()
    epoch_bar.close()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    epochs_executed = epoch

    stacked = {k: torch.stack(v).cpu() for k, v in history.items()}
    records = []
    for s, seed in enumerate(seeds):
        n = int(epochs_run[s])
        records.append({
            "seed": seed,
            "test_acc": float(best["test_acc"][s]),
            "val_acc": float(best["val_acc"][s]),
            "best_val_loss": float(best_val[s]),
            "selected_epoch": int(best_epoch[s]),
            "epochs_run": n,
            # the chunk's wall time per epoch (training step + eval pass), shared out over its
            # seeds; for one seed at a time, simply its wall time per epoch
            "ms_per_seed_epoch": 1000.0 * seconds / epochs_executed / S,
            "gamma": best_gamma[:, s].cpu().clone(),
            "history": {k: v[:n, s].tolist() for k, v in stacked.items()},
            "engine": f"batched (chunk of {S})" if batched else "single",
        })
    return records


def train_seed(graph: dict, hp: dict, seed: int, device: torch.device | str = "cpu", method: str = "cadnet") -> dict:
    """One seed through the same loop with the method's single-seed model: the reference."""
    return train_chunk(graph, hp, [seed], device, method, batched=False)[0]


# ---------------------------------------------------------------------------- bookkeeping


def code_fingerprint(path: Path) -> str:
    """SHA-256 of a module's syntax tree without docstrings: comments, docstrings and layout
    can change without making finished seeds stale."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def run_fingerprint(dataset: str, method: str, hp: dict, engine: str) -> str:
    """What a stored seed must match to be reused: hyperparameters, graph file, engine and code."""
    graph_file = PROCESSED_ROOT / dataset / "graph.pt"
    if not graph_file.exists():
        raise config.DataError(f"{graph_file}: not found; run `dvc repro preprocess@{dataset}` first")
    sources = [code_fingerprint(p) for p in SOURCE_FILES]
    return config.fingerprint(dataset, method, hp, engine, sha256_of(graph_file), sources)


def load_seed(path: Path) -> dict:
    return torch.load(path, weights_only=False)


def pending_seeds(run_dir: Path, runs: int, fingerprint: str) -> list[int]:
    """Remove stale or surplus seed files; return the seeds still to train."""
    run_dir.mkdir(parents=True, exist_ok=True)
    done = set()
    for path in run_dir.glob("seed_[0-9][0-9][0-9].pt"):
        seed = int(path.stem.split("_")[1])
        try:
            keep = seed < runs and load_seed(path).get("fingerprint") == fingerprint
        except Exception:  # an unreadable file is as good as missing
            keep = False
        if keep:
            done.add(seed)
        else:
            path.unlink()
    for leftover in run_dir.glob(".*.tmp"):
        leftover.unlink()
    return [s for s in range(runs) if s not in done]


@functools.lru_cache(maxsize=1)
def _graph_in_worker(dataset: str) -> dict:
    """Each joblib worker loads the graph once instead of receiving a pickled copy per seed."""
    torch.set_num_threads(1)
    return load_graph(dataset, root=PROCESSED_ROOT)


def _train_seed_in_worker(dataset: str, hp: dict, method: str, seed: int) -> dict:
    return train_seed(_graph_in_worker(dataset), hp, seed, "cpu", method)


def chunk_size(graph: dict, hp: dict, params: dict, runs: int) -> int:
    """Seeds per batched chunk: at most ``seed_chunk`` (``auto``: no limit), fewer where the
    estimated peak memory would pass ``memory_budget_gb``, evened out over the chunks needed."""
    limit = runs if params.get("seed_chunk", "auto") == "auto" else min(params["seed_chunk"], runs)
    budget = params.get("memory_budget_gb", 6) * 2**30
    sizes = dict(
        nodes=graph["y"].size(0), directed_edges=graph["edge_index"].size(1), features=graph["x"].size(1),
        feature_nnz=graph["x"]._nnz(), classes=graph["num_classes"], hidden=hp["hidden"], K=hp["K"],
    )
    fits = max([s for s in range(1, limit + 1) if estimate_peak_bytes(**sizes, seeds=s) <= budget], default=1)
    chunks = -(-runs // fits)
    return -(-runs // chunks)


def batched_chunks(pending: list[int], size: int, runs: int) -> list[list[int]]:
    """The chunks to train: fixed blocks of seeds ``[k*size, (k+1)*size)``, each trained whole
    when any of its seeds is pending, so a resumed run repeats exactly what a full run does
    (a seed's dropout stream depends on its chunk); only the pending seeds' files are written."""
    blocks = sorted({seed // size for seed in pending})
    return [list(range(k * size, min((k + 1) * size, runs))) for k in blocks]


def train_seeds(dataset: str, hp: dict, method: str, seeds: list[int], device: torch.device, n_jobs: int):
    """Yield seed records as they finish: joblib processes on CPU, one after another on CUDA."""
    if device.type == "cuda" or n_jobs == 1 or len(seeds) == 1:
        graph = load_graph(dataset, root=PROCESSED_ROOT)
        for seed in seeds:
            yield train_seed(graph, hp, seed, device, method)
        return
    jobs = (delayed(_train_seed_in_worker)(dataset, hp, method, seed) for seed in seeds)
    yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered")(jobs)


def main(argv: list[str]) -> None:
    if not argv:
        raise config.ConfigError("usage: python -m pipeline.train <dataset> [<method>]")
    dataset, method = argv[0], (argv[1] if len(argv) > 1 else "cadnet")
    params = config.load_params()
    hp = config.hparams_for(params, dataset, method)
    device = resolve_device(params.get("device", "auto"))

    runs, engine = config.runs_for(params, dataset, method), params.get("engine", "batched")
    if not REGISTRY[method].batched:
        engine = "single"
    if engine == "batched":
        graph = load_graph(dataset, root=PROCESSED_ROOT)
        size = chunk_size(graph, hp, params, runs)
        fingerprint = run_fingerprint(dataset, method, hp, f"batched, chunks of {size}")
    else:
        fingerprint = run_fingerprint(dataset, method, hp, "single")
    run_dir = RUNS_ROOT / dataset / method
    seeds = pending_seeds(run_dir, runs, fingerprint)
    if engine == "batched":
        pending = set(seeds)
        records = (record for chunk in batched_chunks(seeds, size, runs)
                   for record in train_chunk(graph, hp, chunk, device, method) if record["seed"] in pending)
    else:
        records = train_seeds(dataset, hp, method, seeds, device, params.get("n_jobs", -1))
    reused = runs - len(seeds)
    desc = f"train {dataset}/{method} ({engine}, {device.type})" + (f", {reused} seeds reused" if reused else "")
    with tqdm(total=len(seeds), desc=desc, unit="seed") as bar:
        for record in records:
            record["fingerprint"] = fingerprint
            write_atomic(seed_file(run_dir, record["seed"]), lambda p: torch.save(record, p))
            bar.set_postfix(last_acc=f"{100 * record['test_acc']:.1f}")
            bar.update()


if __name__ == "__main__":
    # Run main() from the imported module, not __main__, so that joblib's worker processes
    # can find _train_seed_in_worker by its module path.
    from pipeline import train

    config.run_main(train.main)
