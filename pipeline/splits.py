"""Which nodes train, validate and test, per seed.

- ``public``: the Planetoid split shipped with the citation datasets (20 labelled nodes per
  class, 500 validation, 1000 test); every seed sees the same split.
- ``per_class``: a new random split per seed, ``train_per_class`` and ``val_per_class`` nodes
  of every class, the rest test (Amazon and Coauthor; SPEC.md "Data and protocol").

Its numbers have their own version (``spec.COMPONENTS["splits"]``), part of every cell's spec.
"""
from __future__ import annotations

import torch
from torch import Tensor

from pipeline.config import ConfigError, DataError


def split_masks(graph: dict, hp: dict, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Train, validation and test masks of seed ``seed`` under ``hp["split"]``."""
    if hp["split"] == "public":
        if graph["train_mask"] is None:
            raise ConfigError("split: 'public' but this dataset has no public split; use per_class")
        return graph["train_mask"], graph["val_mask"], graph["test_mask"]
    return per_class_split(graph["y"], graph["num_classes"], hp["train_per_class"], hp["val_per_class"], seed)


def per_class_split(
    y: Tensor, num_classes: int, train_per_class: int, val_per_class: int, seed: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Random train/val/test masks with exactly train_per_class / val_per_class nodes per class.

    Written by hand because PyG's RandomNodeSplit draws validation nodes from the whole graph,
    not per class. A local generator keeps it deterministic in `seed` without touching the
    global RNG state that model initialisation relies on.
    """
    y = y.cpu()
    generator = torch.Generator().manual_seed(seed)
    train = torch.zeros(y.size(0), dtype=torch.bool)
    val = torch.zeros(y.size(0), dtype=torch.bool)
    need = train_per_class + val_per_class
    for c in range(num_classes):
        members = (y == c).nonzero().view(-1)
        if members.numel() < need:
            raise DataError(
                f"class {c} has {members.numel()} nodes; the split needs train_per_class + "
                f"val_per_class = {train_per_class} + {val_per_class} = {need}"
            )
        members = members[torch.randperm(members.numel(), generator=generator)]
        train[members[:train_per_class]] = True
        val[members[train_per_class:need]] = True
    return train, val, ~(train | val)
