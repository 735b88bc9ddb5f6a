"""Which nodes train, validate and test, per seed.

- ``public``: the Planetoid split shipped with the citation datasets (20 labelled nodes per
  class, 500 validation, 1000 test); every seed sees the same split.
- ``per_class``: a new random split per seed, ``train_per_class`` and ``val_per_class`` nodes
  of every class, the rest test (Amazon and Coauthor; SPEC.md "Data and protocol").
- ``public_subset``: the public split with ``train_per_class`` of each class's public training
  nodes (the label-rate study, Figure 2): the first of one fixed permutation of each class's
  public training nodes, the same for every seed and method, so that the subsets of 5, 10, 15
  and 20 nest; validation and test stay public. The permutation is our choice (SPEC.md, "The
  studies"): the paper says "randomly reduced" and shows no more. ``subset_seed`` (a study's
  setting; 0 where none sets it) draws another permutation, to see how much the choice moves.
- ``random_planetoid``: PyG's ``random_planetoid_splits``, which the authors' ``datasets.py``
  holds (Table 4): per class, ``train_per_class`` nodes at random; the rest pooled and shuffled,
  the first 500 validation and the next 1000 test, the remainder unused; drawn from a generator
  seeded by the seed, so that run s of every method sees the same split (theirs drew from the
  global RNG, which cannot be recovered).

Its numbers have their own version (``spec.COMPONENTS["splits"]``), part of every cell's spec.
"""
from __future__ import annotations

import torch
from torch import Tensor

from pipeline.config import ConfigError, DataError


# random_planetoid: the pooled validation and test sizes of PyG's random_planetoid_splits (its
# defaults, and the paper's Table 4: 500 and 1000)
RANDOM_PLANETOID_VAL, RANDOM_PLANETOID_TEST = 500, 1000
# public_subset: the seed of the one permutation of each class's public training nodes
PUBLIC_SUBSET_SEED = 0


def split_masks(graph: dict, hp: dict, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Train, validation and test masks of seed ``seed`` under ``hp["split"]``."""
    split = hp["split"]
    if split in ("public", "public_subset") and graph["train_mask"] is None:
        raise ConfigError(f"split: {split!r} but this dataset has no public split; use per_class")
    if split == "public":
        return graph["train_mask"], graph["val_mask"], graph["test_mask"]
    if split == "public_subset":
        train = public_subset(graph["y"], graph["train_mask"], graph["num_classes"], hp["train_per_class"],
                              hp.get("subset_seed", PUBLIC_SUBSET_SEED))
        return train, graph["val_mask"], graph["test_mask"]
    if split == "random_planetoid":
        return random_planetoid_split(graph["y"], graph["num_classes"], hp["train_per_class"], seed)
    return per_class_split(graph["y"], graph["num_classes"], hp["train_per_class"], hp["val_per_class"], seed)


def public_subset(y: Tensor, train_mask: Tensor, num_classes: int, per_class: int,
                  subset_seed: int = PUBLIC_SUBSET_SEED) -> Tensor:
    """The first ``per_class`` of a fixed permutation (drawn with ``subset_seed``) of each
    class's public training nodes."""
    generator = torch.Generator().manual_seed(subset_seed)
    y, train_mask = y.cpu(), train_mask.cpu()
    train = torch.zeros_like(train_mask)
    for c in range(num_classes):
        members = (train_mask & (y == c)).nonzero().view(-1)
        if members.numel() < per_class:
            raise DataError(f"class {c} has {members.numel()} public training nodes; train_per_class is {per_class}")
        train[members[torch.randperm(members.numel(), generator=generator)[:per_class]]] = True
    return train


def random_planetoid_split(y: Tensor, num_classes: int, train_per_class: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """PyG's ``random_planetoid_splits`` with a generator seeded by ``seed`` (written here
    because PyG's draws from the global RNG, which model initialisation relies on)."""
    y = y.cpu()
    generator = torch.Generator().manual_seed(seed)
    train = torch.zeros(y.size(0), dtype=torch.bool)
    rest = []
    for c in range(num_classes):
        members = (y == c).nonzero().view(-1)
        if members.numel() < train_per_class:
            raise DataError(f"class {c} has {members.numel()} nodes; train_per_class is {train_per_class}")
        members = members[torch.randperm(members.numel(), generator=generator)]
        train[members[:train_per_class]] = True
        rest.append(members[train_per_class:])
    rest = torch.cat(rest)
    if rest.numel() < RANDOM_PLANETOID_VAL + RANDOM_PLANETOID_TEST:
        raise DataError(f"{rest.numel()} nodes outside the training set; the split needs "
                        f"{RANDOM_PLANETOID_VAL} + {RANDOM_PLANETOID_TEST}")
    rest = rest[torch.randperm(rest.numel(), generator=generator)]
    val = torch.zeros_like(train)
    test = torch.zeros_like(train)
    val[rest[:RANDOM_PLANETOID_VAL]] = True
    test[rest[RANDOM_PLANETOID_VAL:RANDOM_PLANETOID_VAL + RANDOM_PLANETOID_TEST]] = True
    return train, val, test


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
