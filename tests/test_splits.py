"""pipeline/engine/splits.py: the label-rate study's subsets of the public split and Table 4's random
Planetoid splits, on graphs small enough to check by hand."""
from __future__ import annotations

import pytest
import torch

from pipeline.config import ConfigError, DataError
from pipeline.engine.splits import RANDOM_PLANETOID_TEST, RANDOM_PLANETOID_VAL, split_masks


def public_graph() -> dict:
    """3 classes of 10 nodes (node i is of class i // 10); public training nodes: the first 4 of
    each class; validation: the next 3; test: the rest."""
    y = torch.arange(30) // 10
    position = torch.arange(30) % 10
    return {"y": y, "num_classes": 3, "train_mask": position < 4,
            "val_mask": (position >= 4) & (position < 7), "test_mask": position >= 7}


def test_a_public_subset_takes_k_of_each_classs_public_training_nodes_the_same_for_every_seed():
    graph = public_graph()
    subsets = {}
    for k in (1, 2, 3, 4):
        train, val, test = split_masks(graph, {"split": "public_subset", "train_per_class": k}, seed=0)
        assert torch.equal(val, graph["val_mask"]) and torch.equal(test, graph["test_mask"])  # public
        assert not (train & ~graph["train_mask"]).any()  # drawn from the public training nodes only
        assert torch.bincount(graph["y"][train], minlength=3).tolist() == [k, k, k]
        for seed in (1, 7):  # the same subset for every seed (and so for every method)
            assert torch.equal(split_masks(graph, {"split": "public_subset", "train_per_class": k}, seed)[0], train)
        subsets[k] = train
    for k in (1, 2, 3):  # nested: 1 in 2 in 3 in 4
        assert not (subsets[k] & ~subsets[k + 1]).any()
    assert torch.equal(subsets[4], graph["train_mask"])  # all of them: the public split itself


def test_another_subset_seed_draws_other_subsets_still_nested_and_seed_0_is_the_default():
    graph = public_graph()

    def subset(k, **seed):
        return split_masks(graph, {"split": "public_subset", "train_per_class": k, **seed}, seed=3)[0]

    assert all(torch.equal(subset(k, subset_seed=0), subset(k)) for k in (1, 2))
    others = {k: subset(k, subset_seed=5) for k in (1, 2, 3)}
    assert not torch.equal(others[1], subset(1)) and not torch.equal(others[2], subset(2))
    assert torch.bincount(graph["y"][others[1]], minlength=3).tolist() == [1, 1, 1]
    assert not (others[1] & ~others[2]).any() and not (others[2] & ~others[3]).any()


def test_a_public_subset_larger_than_the_public_split_or_without_one_is_one_line():
    with pytest.raises(DataError, match="class 0 has 4 public training nodes; train_per_class is 5"):
        split_masks(public_graph(), {"split": "public_subset", "train_per_class": 5}, 0)
    with pytest.raises(ConfigError, match="'public_subset' but this dataset has no public split"):
        split_masks({**public_graph(), "train_mask": None}, {"split": "public_subset", "train_per_class": 2}, 0)


def random_graph(per_class: int = 600) -> torch.Tensor:
    return {"y": torch.arange(3 * per_class) % 3, "num_classes": 3, "train_mask": None}


def test_a_random_planetoid_split_is_pygs_sizes_disjoint_and_the_same_for_the_same_run_index():
    graph = random_graph()
    hp = {"split": "random_planetoid", "train_per_class": 20}
    state = torch.random.get_rng_state()
    train, val, test = split_masks(graph, hp, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global stream, which seeds the models, untouched
    assert torch.bincount(graph["y"][train], minlength=3).tolist() == [20, 20, 20]
    assert (int(val.sum()), int(test.sum())) == (RANDOM_PLANETOID_VAL, RANDOM_PLANETOID_TEST) == (500, 1000)
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()
    assert int((~(train | val | test)).sum()) == 1800 - 60 - 1500  # the remainder unused, as PyG's
    again = split_masks(graph, hp, seed=3)  # run 3 of every method sees this split
    assert all(torch.equal(a, b) for a, b in zip((train, val, test), again))
    other = split_masks(graph, hp, seed=4)
    assert not torch.equal(other[0], train) and not torch.equal(other[1], val)


def test_a_random_planetoid_split_of_too_small_a_graph_is_one_line():
    with pytest.raises(DataError, match="the split needs 500 \\+ 1000"):
        split_masks(random_graph(per_class=400), {"split": "random_planetoid", "train_per_class": 20}, 0)
