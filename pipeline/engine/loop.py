"""The one training loop that every method of the registry (:mod:`pipeline.models.registry`)
goes through, S seeds side by side (:func:`train_chunk`), or one seed with the method's
single-seed network (:func:`train_seed`, the readable reference).

A batch may also hold *replicas* of several cells (:func:`train_replicas`): cells of one
method whose settings differ only in what changes no network shape (the split's training
nodes, and the settings of the method's ``replica_settings``: CAD-Net's beta, lambda_ent and
dropout rate) train side by side, each replica with its own masks, values and random streams.

The protocol follows the authors' code (docs/SPEC.md), for every method: Adam with amsgrad,
weight decay on all parameters, a step learning-rate drop, one training step then one
eval-mode pass per epoch, the reported test accuracy is the one at the epoch of lowest
validation loss, and early stopping after ``epochs // 2`` when the validation loss exceeds
the mean of the previous ``early_stop_window`` epochs. The loss is the NLL on the training
nodes plus whatever terms the method's network returns (CAD-Net: its entropy regulariser), so
the loop knows nothing about any one method.
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple

import torch
from torch import Tensor

from pipeline import config, progress
from pipeline.engine.splits import split_masks
from pipeline.models import REGISTRY
from pipeline.models.seeds import masked_accuracy, masked_nll


class TrainingError(config.PipelineError):
    """Training itself went wrong (a non-finite loss, memory): reported as one line."""


class Replica(NamedTuple):
    """One seed of one cell: the unit a batch stacks."""
    hp: dict  # the cell's settings
    seed: int


# What makes a replica's split: each replica of a batch has its own masks, whatever its method.
SPLIT_SETTINGS = ("split", "train_per_class", "val_per_class", "subset_seed")
# Settings that size the batch, not what a replica computes (for a method whose seeds do not
# depend on their chunk).
BATCH_SETTINGS = ("seed_chunk",)


def settings_free_within_a_batch(method: str, hp: dict) -> set[str]:
    """The settings that may differ between the replicas of one batch of ``method`` (a cell's
    settings ``hp``): none for a method whose seeds share their batch's dropout stream (only a
    cell's own seeds batch)."""
    entry = REGISTRY[method]
    if not entry.independent_of_chunk(hp):
        return set()
    return set(SPLIT_SETTINGS) | set(entry.replica_settings) | set(BATCH_SETTINGS)


def differing_settings(replicas: list[Replica], method: str) -> dict[str, list]:
    """The values, one per replica, of the method's ``replica_settings`` that differ between
    ``replicas``; an error where they differ in anything else that a batch must share."""
    entry = REGISTRY[method]
    keys = sorted(set().union(*(r.hp for r in replicas)))
    differ = [k for k in keys if len({repr(r.hp.get(k)) for r in replicas}) > 1]
    may = settings_free_within_a_batch(method, replicas[0].hp)
    if set(differ) - may:
        raise ValueError(f"replicas of {method} differ in {sorted(set(differ) - may)}, which one batch must share")
    return {k: [r.hp[k] for r in replicas] for k in differ if k in entry.replica_settings}


def build_net(graph: dict, hp: dict, method: str, seeds: list[int], batched: bool,
              per_replica: dict[str, list] | None = None) -> torch.nn.Module:
    """The method's network for ``seeds`` (its registry entry's builder), with one value per seed
    of the settings in ``per_replica``. A method without a batched form trains seed by seed
    (``batched`` is then ignored)."""
    entry = REGISTRY[method]
    if per_replica:
        return entry.build(graph, hp, seeds, batched and entry.batched_for(hp), per_replica=per_replica)
    return entry.build(graph, hp, seeds, batched and entry.batched_for(hp))


def make_optimizer(params, hp: dict):
    """Adam(amsgrad) with weight decay on every parameter, and the step lr drop (or none); or,
    where ``hp["optimizer"]`` is "sgd" (MixHop's authors' code), plain SGD whose lr falls by
    ``lr_decrement`` x the initial lr every ``lr_decrement_every`` epochs."""
    if hp.get("optimizer", "adam") == "sgd":
        optimizer = torch.optim.SGD(params, lr=hp["lr"], weight_decay=hp["weight_decay"])
        every, step = hp["lr_decrement_every"], hp["lr_decrement"]

        def fall(done: int) -> float:
            # their loop lowers the lr after step i when i > 0 and i % every == 0 (i from 0):
            # the epoch after ``done`` finished ones runs at lr * this
            return 1 - step * max(0, (done - 1) // every)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, fall)
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


def stops_early(val_history: Tensor, epochs: int, window: int) -> Tensor:
    """:func:`should_stop_early` for every seed at once, on the device: ``val_history`` is
    ``[epochs so far, S]``. The mean is taken in double precision, as Python's is: the sum of a
    few float32 values is exact there, so both give the same answer, ties included."""
    epoch = val_history.size(0)
    if window <= 0 or epoch <= epochs // 2 or epoch < 2:
        return torch.zeros(val_history.size(1), dtype=torch.bool, device=val_history.device)
    previous = val_history[max(0, epoch - 1 - window):epoch - 1].double()
    return val_history[-1].double() > previous.sum(0) / previous.size(0)


# Epochs between the host's looks at the seeds (divergence, all stopped, which to freeze): each
# look synchronises with the device. A seed that stopped since the last look trains on until the
# next, which changes none of its numbers (its selection, epochs and history stop at its own
# epoch; seeds share no gradient). On a CPU a look costs nothing.
HOST_CHECK_EVERY = {"cpu": 1, "cuda": 25}


def train_chunk(graph: dict, hp: dict, seeds: list[int], device: torch.device | str = "cpu",
                method: str = "cadnet", batched: bool = True) -> list[dict]:
    """The one training loop: train ``seeds`` of ``method`` side by side and return one record
    per seed. Everything stays per seed: initial weights (the builder seeds them), dropout
    masks, splits, early stopping (a stopped seed's parameters are frozen while the others go
    on) and model selection. With ``batched=False`` (one seed: the readable reference) the
    network is the method's single-seed model; the records mean the same either way."""
    return train_replicas(graph, [Replica(hp, seed) for seed in seeds], device, method, batched)


def train_replicas(graph: dict, replicas: list[Replica], device: torch.device | str = "cpu",
                   method: str = "cadnet", batched: bool = True) -> list[dict]:
    """:func:`train_chunk` for replicas of several cells of ``method`` (:func:`differing_settings`
    says which may share a batch): one record per replica, in their order, each what its cell's
    seed gives trained on its own."""
    device = torch.device(device)
    if not batched and len(replicas) != 1:
        return [r for one in replicas for r in train_replicas(graph, [one], device, method, batched=False)]
    S = len(replicas)
    hp, seeds = replicas[0].hp, [r.seed for r in replicas]
    net = build_net(graph, hp, method, seeds, batched, differing_settings(replicas, method)).to(device)
    splits = [split_masks(graph, r.hp, r.seed) for r in replicas]
    masks = [torch.stack([s[part] for s in splits], dim=1).to(device) for part in range(3)]
    if hasattr(net, "read_rows"):  # a network that computes only the rows the loss and accuracies read
        net.read_rows(masks[0].any(1), (masks[0] | masks[1] | masks[2]).any(1))
    y = graph["y"].to(device)
    torch.manual_seed(seeds[0])  # the single-seed network's dropout stream (batched: one per seed)
    optimizer, scheduler = make_optimizer(net.parameters(), hp)

    parts = ("train", "val", "test")
    history = {f"{p}_{w}": [] for p in parts for w in ("loss", "acc")}  # per epoch: [S] tensors
    active = torch.ones(S, dtype=torch.bool, device=device)
    epochs_run = torch.zeros(S, dtype=torch.long, device=device)
    val_history = torch.zeros(hp["epochs"], S, device=device)
    # the first epoch at which a running seed's training loss was not finite (0: none), and that loss
    diverged_at = torch.zeros(S, dtype=torch.long, device=device)
    diverged_loss = torch.zeros(S, device=device)
    frozen = torch.zeros(0, dtype=torch.long, device=device)  # the stopped seeds, as of the last host check
    check_every = HOST_CHECK_EVERY.get(device.type, 1)
    best_val = torch.full((S,), math.inf, device=device)
    best = {k: torch.zeros(S, device=device) for k in ("val_acc", "test_acc")}
    best_epoch = torch.zeros(S, dtype=torch.long, device=device)
    best_gamma = torch.zeros(graph["y"].size(0), S, device=device)

    start = time.perf_counter()
    cells = len({id(r.hp) for r in replicas})
    label = f"seeds {seeds[0]}-{seeds[-1]}" if cells == 1 else f"{S} replicas of {cells} cells"
    epoch_bar = progress.inner(hp["epochs"], f"  {label}", "epoch")
    for epoch in range(1, hp["epochs"] + 1):
        net.train()
        optimizer.zero_grad()
        out = net()
        per_seed_loss = masked_nll(out.log_probs, y, masks[0]) + out.regularizer
        first = (diverged_at == 0) & active & ~torch.isfinite(per_seed_loss.detach())
        diverged_at = torch.where(first, epoch, diverged_at)
        diverged_loss = torch.where(first, per_seed_loss.detach(), diverged_loss)
        per_seed_loss.sum().backward()  # seed s's gradient is its own loss's
        saved = net.seed_slices(frozen) if frozen.numel() else None
        optimizer.step()
        if saved is not None:
            net.restore_seed_slices(frozen, saved)

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
        epochs_run = torch.where(active, epoch, epochs_run)
        val_history[epoch - 1] = val_loss
        active = active & ~stops_early(val_history[:epoch], hp["epochs"], hp["early_stop_window"])
        epoch_bar.update()
        if epoch % check_every == 0 or epoch == hp["epochs"]:  # the host looks: the only synchronisations
            if diverged_at.any():
                bad = int(diverged_at.masked_fill(diverged_at == 0, epoch + 1).argmin())
                raise TrainingError(f"seed {seeds[bad]}: training loss is {float(diverged_loss[bad])} at epoch "
                                    f"{int(diverged_at[bad])}; the settings make training diverge (lr, weight_decay, lambda_ent?)")
            frozen = (~active).nonzero().view(-1)
            epoch_bar.set_postfix(active=S - frozen.numel())
            if frozen.numel() == S:
                break
        if scheduler is not None:
            scheduler.step()
    epoch_bar.close()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    epochs_executed = epoch

    stacked = {k: torch.stack(v).cpu() for k, v in history.items()}
    epochs_run = epochs_run.cpu()
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
