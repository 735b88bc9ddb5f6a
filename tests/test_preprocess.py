"""Tests for the preprocess stage: real Cora/CiteSeer, tiny hand-made raw files, splits, errors."""
from __future__ import annotations

import json
import pickle
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import yaml
from torch_geometric.data import Data
from torch_geometric.transforms import NormalizeFeatures
from torch_geometric.utils import coalesce, is_undirected

PROJECT = Path(__file__).resolve().parents[1]

from conftest import REAL_MIRROR, needs_real_mirror, shipped_params_text
from pipeline import preprocess as pp
from pipeline import config
from pipeline.engine import splits
from pipeline.config import ConfigError, DataError

MIRROR = REAL_MIRROR / "planetoid"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root in tmp_path holding the shipped params.yaml."""
    (tmp_path / "params.yaml").write_text(shipped_params_text())
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def unlisted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checksum table that lists no file, for the tests' own small raw files (the shipped
    table's rows would refuse them as not the upstream files)."""
    from pipeline import download

    table = tmp_path / "no_rows.tsv"
    table.write_text("\t".join(download.CHECKSUM_COLUMNS) + "\n")
    monkeypatch.setattr(download, "CHECKSUMS_FILE", table)


def set_params(root: Path, **overrides: object) -> None:
    """Rewrite params.yaml with some top-level keys (e.g. global overrides) replaced."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    params.update(overrides)
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def copy_planetoid(root: Path, name: str) -> None:
    """Copy the 8 real planetoid files of `name` into root/data/raw/<name>/."""
    folder = root / "data" / "raw" / name
    folder.mkdir(parents=True)
    for part in pp.PLANETOID_PARTS:
        shutil.copy(MIRROR / f"ind.{name}.{part}", folder / f"ind.{name}.{part}")


def run_stage(root: Path, name: str) -> tuple[dict, dict]:
    pp.main([name])
    stats = json.loads((root / "reports/data" / f"{name}.json").read_text())
    return pp.load_graph(name), stats


def assert_clean(edge_index: torch.Tensor, num_nodes: int, loops: bool) -> None:
    """Symmetric, sorted, no duplicates, and one self-loop per node exactly when asked."""
    assert edge_index.dtype == torch.long
    assert is_undirected(edge_index, num_nodes=num_nodes)
    assert torch.equal(coalesce(edge_index, num_nodes=num_nodes), edge_index)
    is_loop = edge_index[0] == edge_index[1]
    if loops:
        assert torch.equal(edge_index[0, is_loop].sort()[0], torch.arange(num_nodes))
    else:
        assert not is_loop.any()


def row_sums(x: torch.Tensor) -> torch.Tensor:
    return torch.sparse.sum(x, dim=1).to_dense()



# ---------------------------------------------------------------- the real files of all seven

# nodes, undirected edges, features, classes (the paper's Table 1 / docs/SPEC.md)
REAL_STATS = {
    "citeseer": (3327, 4552, 3703, 6), "cora": (2708, 5278, 1433, 7), "pubmed": (19717, 44324, 500, 3),
    "computers": (13752, 245861, 767, 10), "photo": (7650, 119081, 745, 8), "cs": (18333, 81894, 6805, 15),
    "physics": (34493, 247962, 8415, 5),
}
SELF_LOOPS = {"citeseer", "cora", "photo"}  # the table's self-loop row


@needs_real_mirror()
@pytest.mark.parametrize("name", list(REAL_STATS))
def test_real_files_of_every_dataset_match_the_paper(workdir, name):
    """Each raw file as the mirror holds it (byte-identical to upstream), through the stage:
    the paper's counts, sparse row-normalised features, a clean symmetric graph with
    self-loops exactly where the table adds them, the public split where there is one."""
    nodes, edges, features, classes = REAL_STATS[name]
    folder = workdir / "data" / "raw" / name
    folder.mkdir(parents=True)
    for path in pp.raw_files(name, workdir / "data" / "raw"):
        source = "planetoid" if name in pp.PLANETOID else "gnn-benchmark"
        shutil.copy(REAL_MIRROR / source / path.name, path)
    graph, stats = run_stage(workdir, name)
    loops = name in SELF_LOOPS
    assert (stats["nodes"], stats["undirected_edges"], stats["features"], stats["classes"]) == REAL_STATS[name]
    assert stats["directed_edges"] == 2 * edges + (nodes if loops else 0)
    assert_clean(graph["edge_index"], nodes, loops=loops)
    x = graph["x"]
    assert x.layout == torch.sparse_coo and x.is_coalesced() and x.shape == (nodes, features)
    sums = row_sums(x)  # float32 sums of up to ~760 entries (Amazon): within 1e-4 of 1
    assert torch.all(torch.isclose(sums, torch.ones(nodes), atol=1e-4) | (sums == 0))
    # no raw row sums to less than 1 (PubMed's TF-IDF rows included): the authors' clamped
    # rule and the plain sum give the same features on all seven datasets
    assert stats["raw_feature_rows_summing_below_1"] == 0
    if name in pp.PLANETOID:
        assert (stats["train"], stats["val"], stats["test"]) == (20 * classes, 500, 1000)
    else:
        assert graph["train_mask"] is None  # a new split per seed (pipeline/engine/splits.py)


@needs_real_mirror("planetoid")
@pytest.mark.parametrize(
    "name, nodes, edges, features, classes",
    [("cora", 2708, 5278, 1433, 7), ("citeseer", 3327, 4552, 3703, 6)],
)
def test_real_planetoid_matches_spec(workdir, name, nodes, edges, features, classes):
    copy_planetoid(workdir, name)
    graph, stats = run_stage(workdir, name)

    assert stats == {
        "nodes": nodes, "undirected_edges": edges, "features": features, "classes": classes,
        "self_loops_added": True, "directed_edges": 2 * edges + nodes,
        "feature_normalization": "clamped_sum", "raw_feature_rows_summing_below_1": 0,
        "train": 20 * classes, "val": 500, "test": 1000,
    }
    assert_clean(graph["edge_index"], nodes, loops=True)
    x = graph["x"]
    assert x.layout == torch.sparse_coo and x.is_coalesced() and x.dtype == torch.float32
    assert x.shape == (nodes, features)
    sums = row_sums(x)
    assert torch.all(torch.isclose(sums, torch.ones(nodes)) | (sums == 0))
    assert graph["y"].dtype == torch.long and graph["num_classes"] == classes
    masks = [graph[k] for k in ("train_mask", "val_mask", "test_mask")]
    assert all(m.dtype == torch.bool and m.shape == (nodes,) for m in masks)
    assert not (masks[0] & masks[1]).any() and not (masks[1] & masks[2]).any()
    assert torch.equal(torch.bincount(graph["y"][masks[0]]), torch.full((classes,), 20))


# ---------------------------------------------------------------- tiny npz (gnn-benchmark)


def write_tiny_npz(path: Path) -> None:
    """5 nodes; edges 0->1 twice, 1->0, 2->2 (loop), 2->3 (one-way), 3->4, 4->3.

    CSR arrays are written by hand so the duplicate survives (scipy would sum it away).
    """
    path.parent.mkdir(parents=True)
    np.savez(
        path,
        adj_data=np.ones(7, dtype=np.float32),
        adj_indices=np.array([1, 1, 0, 2, 3, 4, 3]),
        adj_indptr=np.array([0, 2, 3, 5, 6, 7]),
        adj_shape=np.array([5, 5]),
        attr_data=np.array([2.0, 1.0, 1.0, 3.0, 1.0, 1.0], dtype=np.float32),
        attr_indices=np.array([0, 1, 2, 0, 2, 1]),
        attr_indptr=np.array([0, 2, 3, 5, 6, 6]),  # node 4 has no features
        attr_shape=np.array([5, 3]),
        labels=np.array([0, 1, 0, 1, 2]),
    )


TINY_EDGES = torch.tensor([[0, 1, 2, 3, 3, 4], [1, 0, 3, 2, 4, 3]])


@pytest.mark.parametrize("name, loops", [("computers", False), ("photo", True)])
def test_npz_is_cleaned(workdir, unlisted, name, loops):
    write_tiny_npz(workdir / "data/raw" / name / pp.NPZ_FILES[name])
    graph, stats = run_stage(workdir, name)

    expected = TINY_EDGES
    if loops:
        expected = coalesce(torch.cat([TINY_EDGES, torch.arange(5).repeat(2, 1)], dim=1))
    assert torch.equal(graph["edge_index"], expected)
    assert_clean(graph["edge_index"], 5, loops=loops)
    assert stats == {
        "nodes": 5, "undirected_edges": 3, "features": 3, "classes": 3,
        "self_loops_added": loops, "directed_edges": 11 if loops else 6,
        "feature_normalization": "clamped_sum", "raw_feature_rows_summing_below_1": 0,
        "train": None, "val": None, "test": None,
    }
    assert graph["train_mask"] is None and graph["num_classes"] == 3
    # read_npz binarises (2 and 3 become 1), then rows are normalised.
    expected_x = torch.tensor(
        [[0.5, 0.5, 0], [0, 0, 1], [0.5, 0, 0.5], [0, 1, 0], [0, 0, 0]]
    )
    assert torch.allclose(graph["x"].to_dense(), expected_x)


def test_normalize_features_false_keeps_raw_features(workdir, unlisted):
    set_params(workdir, normalize_features=False, self_loops=True)
    write_tiny_npz(workdir / "data/raw/computers" / pp.NPZ_FILES["computers"])
    graph, stats = run_stage(workdir, "computers")
    assert stats["self_loops_added"] and stats["directed_edges"] == 11
    assert torch.equal(row_sums(graph["x"]), torch.tensor([2.0, 1, 2, 1, 0]))


def test_the_features_as_read_are_kept_beside_the_normalised_graph(workdir, unlisted):
    """features_as_read.pt (for baselines under `baselines.protocol.<dataset>.normalize_features`) holds the rows
    as read, whatever rule graph.pt's features were normalised by."""
    write_tiny_npz(workdir / "data/raw/computers" / pp.NPZ_FILES["computers"])
    graph, _ = run_stage(workdir, "computers")
    as_read = pp.load_features_as_read("computers")
    assert torch.equal(row_sums(as_read), torch.tensor([2.0, 1, 2, 1, 0]))
    assert torch.equal(pp.normalize_rows(as_read, "clamped_sum").to_dense(), graph["x"].to_dense())


# ---------------------------------------------------------------- tiny planetoid


def write_tiny_planetoid(folder: Path, name: str) -> None:
    """520 nodes (PyG's public split needs len(y) + 500 nodes): 6 labelled, 504 more, 10 test.

    Graph dict: 0 -> [1, 1, 0] (duplicate and self-loop), 1 -> [0], 2 -> [3] (one-way),
    515 -> [519] (one-way, among the test nodes).
    """
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    n_all, n_test, n_feat = 510, 10, 4
    allx = sp.csr_matrix(rng.integers(0, 2, size=(n_all, n_feat)).astype(np.float32))
    ally = np.eye(3)[rng.integers(0, 3, size=n_all)]
    ally[:6] = np.eye(3)[[0, 0, 1, 1, 2, 2]]
    tx = sp.csr_matrix(rng.integers(0, 2, size=(n_test, n_feat)).astype(np.float32))
    ty = np.eye(3)[rng.integers(0, 3, size=n_test)]
    graph = defaultdict(list, {0: [1, 1, 0], 1: [0], 2: [3], 515: [519]})
    parts = {"x": allx[:6], "y": ally[:6], "allx": allx, "ally": ally,
             "tx": tx, "ty": ty, "graph": graph}
    for part, obj in parts.items():
        with open(folder / f"ind.{name}.{part}", "wb") as f:
            pickle.dump(obj, f)
    test_index = rng.permutation(np.arange(n_all, n_all + n_test))
    (folder / f"ind.{name}.test.index").write_text("\n".join(map(str, test_index)) + "\n")


def test_tiny_planetoid_pubmed_path(workdir, unlisted):
    write_tiny_planetoid(workdir / "data/raw/pubmed", "pubmed")
    graph, stats = run_stage(workdir, "pubmed")  # pubmed: no self-loops in params.yaml

    expected = torch.tensor([[0, 1, 2, 3, 515, 519], [1, 0, 3, 2, 519, 515]])
    assert torch.equal(graph["edge_index"], expected)
    assert stats == {
        "nodes": 520, "undirected_edges": 3, "features": 4, "classes": 3,
        "self_loops_added": False, "directed_edges": 6,
        "feature_normalization": "clamped_sum", "raw_feature_rows_summing_below_1": 0,
        "train": 6, "val": 500, "test": 10,
    }
    assert torch.equal(graph["y"][:6], torch.tensor([0, 0, 1, 1, 2, 2]))
    classes = json.loads((workdir / "reports/data/pubmed.classes.json").read_text())
    assert classes["public_train_per_class"] == [2, 2, 2]  # the six training nodes above, two a class
    assert classes["nodes_per_class"] == [int((graph["y"] == c).sum()) for c in range(3)]
    assert sum(classes["nodes_per_class"]) == 520
    sums = row_sums(graph["x"])
    assert torch.all(torch.isclose(sums, torch.ones(520)) | (sums == 0))


# ---------------------------------------------------------------- per_class_split (pipeline/engine/splits.py)


def class_labels() -> torch.Tensor:
    sizes = [60, 55, 70, 80]
    y = torch.cat([torch.full((n,), c) for c, n in enumerate(sizes)])
    return y[torch.randperm(y.numel(), generator=torch.Generator().manual_seed(1))]


def test_per_class_split_sizes_and_disjoint():
    y = class_labels()
    train, val, test = splits.per_class_split(y, 4, train_per_class=5, val_per_class=7, seed=3)
    assert torch.equal(torch.bincount(y[train], minlength=4), torch.full((4,), 5))
    assert torch.equal(torch.bincount(y[val], minlength=4), torch.full((4,), 7))
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()
    assert torch.all(train | val | test)
    assert int(test.sum()) == y.numel() - 4 * 12


def test_per_class_split_seeded_and_leaves_global_rng_alone():
    y = class_labels()
    state = torch.get_rng_state()
    a = splits.per_class_split(y, 4, 5, 7, seed=0)
    b = splits.per_class_split(y, 4, 5, 7, seed=0)
    c = splits.per_class_split(y, 4, 5, 7, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(m, n) for m, n in zip(a, b))
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[1], c[1])


def test_per_class_split_small_class_is_error():
    y = torch.tensor([0] * 20 + [1] * 11)
    with pytest.raises(DataError, match=r"class 1 has 11 nodes.*= 12"):
        splits.per_class_split(y, 2, train_per_class=5, val_per_class=7, seed=0)


# ---------------------------------------------------------------- errors and atomic writes


@needs_real_mirror("planetoid")
def test_missing_planetoid_file_is_data_error(workdir):
    copy_planetoid(workdir, "cora")
    (workdir / "data/raw/cora/ind.cora.graph").unlink()
    with pytest.raises(DataError, match=r"ind\.cora\.graph.*download stage"):
        pp.main(["cora"])
    assert not (workdir / "data/processed/cora").exists()


def test_missing_npz_file_is_data_error(workdir):
    with pytest.raises(DataError, match=r"ms_academic_phy\.npz.*download stage"):
        pp.main(["physics"])


def test_load_graph_missing_is_data_error(tmp_path):
    with pytest.raises(DataError, match=r"graph\.pt.*preprocess"):
        pp.load_graph("cora", root=tmp_path)


def test_bad_argument_is_config_error(workdir):
    with pytest.raises(ConfigError, match="allowed datasets"):
        pp.main(["coraa"])
    with pytest.raises(ConfigError, match="usage"):
        pp.main([])


# ---------------------------------------------------------------- row normalisation


def test_normalize_rows_toy():
    dense = torch.tensor([[1.0, 1, 0], [0, 0, 0], [2, 0, 2]])
    out = pp.normalize_rows(dense.to_sparse_coo())
    expected = torch.tensor([[0.5, 0.5, 0], [0, 0, 0], [0.5, 0, 0.5]])
    assert out.layout == torch.sparse_coo and out.is_coalesced()
    assert torch.allclose(out.to_dense(), expected)
    # Same as PyG's NormalizeFeatures wherever every nonzero row sums to at least 1.
    assert torch.allclose(NormalizeFeatures()(Data(x=dense.clone())).x, expected)


def test_normalize_rows_sum_scales_small_rows_up_and_clamped_sum_does_not():
    """A row summing below 1 (TF-IDF): ``sum`` scales it up to sum 1; ``clamped_sum`` (PyG
    1.3.2's NormalizeFeatures, x / max(sum, 1)) leaves it; rows above 1 get the same from both."""
    dense = torch.tensor([[0.1, 0.3, 0.0], [2.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
    by_sum = pp.normalize_rows(dense.to_sparse_coo(), "sum").to_dense()
    clamped = pp.normalize_rows(dense.to_sparse_coo(), "clamped_sum").to_dense()
    assert torch.allclose(by_sum, torch.tensor([[0.25, 0.75, 0.0], [0.5, 0.0, 0.5], [0.0, 0.0, 0.0]]))
    assert torch.allclose(clamped, torch.tensor([[0.1, 0.3, 0.0], [0.5, 0.0, 0.5], [0.0, 0.0, 0.0]]))
    assert pp.rows_summing_below_one(dense.to_sparse_coo()) == 1


def test_clamped_sum_is_the_normalisation_pyg_1_3_2_ran():
    """PyG 1.3.2's NormalizeFeatures, written out: ``x / x.sum(1, keepdim=True).clamp(min=1)``."""
    dense = torch.rand(6, 5) * (torch.rand(6, 5) > 0.5) * torch.tensor([[0.1], [1.0], [3.0], [0.5], [2.0], [0.0]])
    authors = dense / dense.sum(1, keepdim=True).clamp(min=1)
    assert torch.allclose(pp.normalize_rows(dense.to_sparse_coo(), "clamped_sum").to_dense(), authors)


@needs_real_mirror("planetoid", "ind.cora.graph")
@pytest.mark.parametrize("part", ["graph", "allx", "test.index"])
def test_a_truncated_raw_file_is_one_line_naming_it(workdir, part):
    """The checksum table names the damaged file; nothing is written."""
    folder = workdir / "data" / "raw" / "cora"
    folder.mkdir(parents=True)
    for path in pp.raw_files("cora", workdir / "data" / "raw"):
        shutil.copy(MIRROR / path.name, path)
    damaged = folder / f"ind.cora.{part}"
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    with pytest.raises(DataError) as info:
        pp.main(["cora"])
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"data/raw/cora/ind.cora.{part}: not the file the checksum"), message
    assert "dvc repro download@cora" in message
    assert not (workdir / "data" / "processed").exists()


def test_an_unreadable_raw_file_the_checksum_table_does_not_list_names_its_folder(workdir, unlisted):
    folder = workdir / "data" / "raw" / "cora"
    folder.mkdir(parents=True)
    for path in pp.raw_files("cora", workdir / "data" / "raw"):
        path.write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(DataError) as info:
        pp.main(["cora"])
    assert str(info.value).startswith("data/raw/cora: a raw file is unreadable (UnpicklingError)"), str(info.value)


def test_a_full_disk_in_preprocess_is_one_line_naming_the_file(workdir, unlisted, monkeypatch):
    import errno

    write_tiny_npz(workdir / "data/raw/computers" / pp.NPZ_FILES["computers"])
    monkeypatch.setattr(Path, "write_bytes", lambda self, data: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(SystemExit) as info:
        config.run_main(pp.main, ["computers"], kept="no file is left half-written")
    assert str(info.value.code) == ("error: data/processed/computers/graph.pt: no space left on device; no file is "
                                    "left half-written; free some space and run it again")
    assert not list((workdir / "data/processed/computers").iterdir())
