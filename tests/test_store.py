"""The seed store (pipeline/engine/store.py): which seed files a cell's folder keeps, what it
copies from a twin cell, and what it reads back to write the tables. The stage-level cases
(resuming, the stash, the lock) are in test_train.py."""
from __future__ import annotations

import pytest
import torch

from conftest import fake_record
from pipeline.engine import loop, store
from pipeline.files import save_torch


def test_a_cell_copies_the_seeds_of_a_twin_cell_and_trains_the_rest(tmp_path):
    """A study point that is another study's cell (β at the dataset's own value) trains under the
    same identity: it copies that cell's seeds, leaves them where they are, and trains only the
    seeds neither has; a cell of another identity lends nothing."""
    family, stash = tmp_path / "runs/cora/cadnet", tmp_path / "stash"
    for seed in range(3):
        save_torch({"seed": seed, "fingerprint": "fp"}, family / "main" / f"seed_{seed:03d}.pt")
    save_torch({"seed": 3, "fingerprint": "other"}, family / "beta-beta=0.5" / "seed_000.pt")
    assert store.sync_seeds("cora", "cadnet", 4, "fp", family / "beta-beta=0.9", stash) == [3]
    assert sorted(p.name for p in (family / "beta-beta=0.9").iterdir()) == [f"seed_00{s}.pt" for s in range(3)]
    assert len(list((family / "main").iterdir())) == 3 and not stash.exists()
    assert store.sync_seeds("cora", "cadnet", 2, "fp2", family / "beta-beta=0.1", stash) == [0, 1]


def test_a_cell_copies_a_twin_of_another_identity_only_where_named_and_records_its_own(tmp_path):
    """A twin that writes a default out (GAT at range 2: ``layers: 2``, which Table 2's cell leaves
    to the default) trains the same network under another identity: named in ``twins``, its seeds
    are copied and record this cell's identity (so that they are kept on the next run); not
    named, they lend nothing."""
    family, stash = tmp_path / "runs/pubmed/gat", tmp_path / "stash"
    for seed in range(2):
        save_torch(dict(fake_record(seed, 0.8, fingerprint="table2"), dataset="pubmed", method="gat"),
                   family / "baselines" / f"seed_{seed:03d}.pt")
    assert store.sync_seeds("pubmed", "gat", 3, "range2", family / "ranges-range=4", stash) == [0, 1, 2]
    cell = family / "ranges-range=2"
    assert store.sync_seeds("pubmed", "gat", 3, "range2", cell, stash, twins=frozenset({"table2"})) == [2]
    copied = [torch.load(cell / f"seed_{s:03d}.pt", weights_only=False) for s in range(2)]
    assert [r["fingerprint"] for r in copied] == ["range2"] * 2 and [r["seed"] for r in copied] == [0, 1]
    assert copied[1]["test_acc"] == 0.8
    assert store.sync_seeds("pubmed", "gat", 3, "range2", cell, stash) == [2] and not stash.exists()
    assert [r["seed"] for r in store.load_records(cell, "pubmed", "gat", 2, "range2")] == [0, 1]


def test_seeds_from_1000_on_are_recognised(tmp_path):
    run_dir, stash = tmp_path / "runs", tmp_path / "stash"
    for seed in (999, 1000, 1001):
        save_torch({"seed": seed, "fingerprint": "fp"}, run_dir / f"seed_{seed:03d}.pt")
    pending = store.sync_seeds("cora", "cadnet", 1001, "fp", run_dir, stash)
    assert 999 not in pending and 1000 not in pending and len(pending) == 999
    assert (stash / "fp" / "seed_1001.pt").exists() and not (run_dir / "seed_1001.pt").exists()


@pytest.mark.parametrize("replace_with, fragment", [
    (lambda: fake_record(0, 0.9, fingerprint="id"), "not seed 1 of cora/cadnet"),  # a copied seed file
    (lambda: dict(fake_record(1, 0.9, fingerprint="id"), method="rw"), "not seed 1 of cora/cadnet"),  # another cell's
    (lambda: fake_record(1, 0.9, fingerprint="other"), "under its spec"),  # other settings
    (lambda: None, "missing"),
])
def test_the_tables_are_written_from_the_cells_own_seeds_only(tmp_path, replace_with, fragment):
    """What train reads back to write the tables: seed 1's file replaced is one line naming it,
    never a row counted twice or of other settings."""
    for seed in range(2):
        torch.save(fake_record(seed, 0.8, fingerprint="id"), tmp_path / f"seed_{seed:03d}.pt")
    assert [r["seed"] for r in store.load_records(tmp_path, "cora", "cadnet", 2, "id")] == [0, 1]
    value = replace_with()
    (tmp_path / "seed_001.pt").unlink()
    if value is not None:
        torch.save(value, tmp_path / "seed_001.pt")
    with pytest.raises(loop.TrainingError) as info:
        store.load_records(tmp_path, "cora", "cadnet", 2, "id")
    assert "seed_001.pt" in str(info.value) and fragment in str(info.value) and "\n" not in str(info.value)
