"""The one training loop that every method of the registry (:mod:`pipeline.models.registry`)
goes through, S seeds side by side (:func:`train_chunk`), or one seed with the method's
single-seed network (:func:`train_seed`, the readable reference).

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

import torch

from pipeline import config, progress
from pipeline.engine.splits import split_masks
from pipeline.models import REGISTRY
from pipeline.models.seeds import masked_accuracy, masked_nll


class TrainingError(config.PipelineError):
    """Training itself went wrong (a non-finite loss, memory): reported as one line."""


def build_net(graph: dict, hp: dict, method: str, seeds: list[int], batched: bool) -> torch.nn.Module:
    """The method's network for ``seeds`` (its registry entry's builder). A method without a
    batched form trains seed by seed (``batched`` is then ignored)."""
    entry = REGISTRY[method]
    return entry.build(graph, hp, seeds, batched and entry.batched)


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
    torch.manual_seed(seeds[0])  # the single-seed network's dropout stream (batched: one per seed)
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
    epoch_bar = progress.inner(hp["epochs"], f"  seeds {seeds[0]}-{seeds[-1]}", "epoch")
    for epoch in range(1, hp["epochs"] + 1):
        net.train()
        optimizer.zero_grad()
        out = net()
        per_seed_loss = masked_nll(out.log_probs, y, masks[0]) + out.regularizer
        finite = torch.isfinite(per_seed_loss) | ~active
        if not finite.all():
            bad = int((~finite).nonzero()[0])
            raise TrainingError(f"seed {seeds[bad]}: training loss is {float(per_seed_loss[bad].detach())} at epoch {epoch}; "
                                f"the settings make training diverge (lr, weight_decay, lambda_ent?)")
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
        epoch_bar.update()
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
