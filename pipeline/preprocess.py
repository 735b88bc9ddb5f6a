"""Preprocess stage: turn one dataset's raw files into a clean graph the later stages can trust.

`python -m pipeline.preprocess <dataset>` reads `data/raw/<dataset>/` with PyG's own readers,
then makes the graph undirected, free of duplicates and self-loops (raw files have all three
defects), adds self-loops back where the dataset's `self_loops` hyperparameter asks for them,
row-normalises the features by the rule `normalize_features` names, and writes
`data/processed/<dataset>/graph.pt` and `reports/data/<dataset>.json`. The stats (kept in git)
let a reader check the graph against the table in SPEC.md without loading it, and its class
sizes (`reports/data/<dataset>.classes.json`) let the check stage refuse a split they cannot
hold before anything trains. Beside graph.pt
it keeps the features as read (`features_as_read.pt`), for the cells that normalise them by
another rule (the baselines under `baseline_protocol.<dataset>.normalize_features`).

The module also holds :func:`load_graph`, which the train stage uses to read `graph.pt`, and
:func:`load_features_as_read` (the splits live in :mod:`pipeline.engine.splits`).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.io import read_npz, read_planetoid_data
from torch_geometric.utils import add_self_loops, coalesce, remove_self_loops, to_undirected

from pipeline import config, paths
from pipeline.config import ConfigError, DataError
from pipeline.download import files_for, is_intact
from pipeline.files import save_torch, write_text_atomic

RAW_ROOT = paths.RAW_ROOT
PROCESSED_ROOT = paths.PROCESSED_ROOT
STATS_ROOT = paths.DATA_STATS_ROOT

PLANETOID = ("citeseer", "cora", "pubmed")
PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
NPZ_FILES = {
    "computers": "amazon_electronics_computers.npz",
    "photo": "amazon_electronics_photo.npz",
    "cs": "ms_academic_cs.npz",
    "physics": "ms_academic_phy.npz",
}


# ---------------------------------------------------------------- reading raw files


def raw_files(dataset: str, raw_root: Path = RAW_ROOT) -> list[Path]:
    """The raw files the download stage writes for `dataset` (names as in checksums.tsv)."""
    folder = raw_root / dataset
    if dataset in PLANETOID:
        return [folder / f"ind.{dataset}.{part}" for part in PLANETOID_PARTS]
    return [folder / NPZ_FILES[dataset]]


def read_raw(dataset: str, raw_root: Path = RAW_ROOT) -> Data:
    """Read the raw files with PyG's reader; a missing file is a DataError, not a traceback."""
    files = raw_files(dataset, raw_root)
    for path in files:
        if not path.is_file():
            raise DataError(f"{path}: raw file missing; run the download stage for {dataset} first")
    fetch_again = f"delete it and run `dvc repro download@{dataset}` to fetch it again"
    for path, row in checksum_rows(dataset, files):
        if not is_intact(path, row):  # a truncated file may still parse (a shorter test.index)
            raise DataError(f"{path}: not the file the checksum table lists ({path.stat().st_size} bytes, expected "
                            f"{row['bytes']}, or another SHA-256); {fetch_again}")
    try:
        if dataset in PLANETOID:
            return read_planetoid_data(str(raw_root / dataset), dataset)
        return read_npz(str(files[0]), to_undirected=True)
    except Exception as err:  # a file the table does not list: EOFError, UnpicklingError, BadZipFile, ...
        raise DataError(f"{files[0].parent}: a raw file is unreadable ({type(err).__name__}); {fetch_again}") from None


def checksum_rows(dataset: str, files: list[Path]) -> list[tuple[Path, dict]]:
    """Each of ``files`` with its row of the checksum table (pipeline/checksums.tsv), where it
    has one: the download stage checked each file against it, and so does this stage."""
    try:
        rows = {row["file"]: row for row in files_for(dataset)}
    except DataError:  # a table that lists none of this dataset's files
        return []
    return [(path, rows[path.name]) for path in files if path.name in rows]


# ---------------------------------------------------------------- cleaning


def clean_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Drop self-loops and duplicates and symmetrise, whatever the reader already did.

    PyG's planetoid reader does not symmetrise and its npz reader may leave duplicates, so
    both cleanings run here again; the result is sorted by (row, col).
    """
    edge_index, _ = remove_self_loops(edge_index)
    return to_undirected(edge_index, num_nodes=num_nodes)


def with_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Add one self-loop per node and keep the (row, col) order the rest of the code expects."""
    edge_index, _ = add_self_loops(edge_index, num_nodes=num_nodes)
    return coalesce(edge_index, num_nodes=num_nodes)


def normalize_rows(x: Tensor, rule: str = "sum") -> Tensor:
    """Divide each row of a sparse COO matrix by its sum (``rule="sum"``: nonzero rows then
    sum to 1) or by max(sum, 1) (``rule="clamped_sum"``: PyG 1.3.2's ``NormalizeFeatures``,
    which the authors ran; rows summing below 1, such as TF-IDF rows, stay as they are).

    Rows that sum to zero stay zero.
    """
    x = x.coalesce()
    row_sum = torch.sparse.sum(x, dim=1).to_dense()
    if rule == "clamped_sum":
        row_sum = row_sum.clamp(min=1.0)
    scale = torch.where(row_sum != 0, 1.0 / row_sum, torch.zeros_like(row_sum))
    values = x.values() * scale[x.indices()[0]]
    return torch.sparse_coo_tensor(
        x.indices(), values, x.shape, is_coalesced=True, check_invariants=True
    )


def sparse_features(x: Tensor, normalize: str | bool) -> Tensor:
    """Features as a coalesced float32 sparse COO tensor, row-normalised by the rule
    ``normalize`` names (``sum`` or ``clamped_sum``; ``false``: as read)."""
    x = x.to(torch.float32).to_sparse_coo().coalesce()
    return normalize_rows(x, normalize) if normalize else x


def rows_summing_below_one(x: Tensor) -> int:
    """Rows with 0 < sum < 1: the only rows where the ``sum`` and ``clamped_sum`` rules differ."""
    row_sum = torch.sparse.sum(x.to(torch.float32).to_sparse_coo(), dim=1).to_dense()
    return int(((row_sum > 0) & (row_sum < 1)).sum())


# ---------------------------------------------------------------- building the outputs


def class_counts(graph: dict) -> dict:
    """Each class's nodes, and its training nodes in the public split (None without one): what
    the check stage holds a split's per-class sizes to before anything trains."""
    sizes = torch.bincount(graph["y"], minlength=graph["num_classes"])
    train = graph["train_mask"]
    public = None if train is None else torch.bincount(graph["y"][train], minlength=graph["num_classes"]).tolist()
    return {"nodes_per_class": sizes.tolist(), "public_train_per_class": public}


def build_graph(data: Data, hparams: dict) -> tuple[dict, dict]:
    """The graph.pt dict and the stats.json dict for one raw dataset."""
    num_nodes = data.y.size(0)
    edge_index = clean_edges(data.edge_index, num_nodes)
    undirected_edges = edge_index.size(1) // 2  # symmetric, loop-free: each pair twice
    if hparams["self_loops"]:
        edge_index = with_self_loops(edge_index, num_nodes)

    masks = {k: getattr(data, k, None) for k in ("train_mask", "val_mask", "test_mask")}
    graph = {
        "x": sparse_features(data.x, hparams["normalize_features"]),
        "edge_index": edge_index.long(),
        "y": data.y.long(),
        "num_classes": int(data.y.max()) + 1,
        **{k: None if m is None else m.bool() for k, m in masks.items()},
    }
    stats = {
        "nodes": num_nodes,
        "undirected_edges": undirected_edges,
        "features": graph["x"].size(1),
        "classes": graph["num_classes"],
        "self_loops_added": bool(hparams["self_loops"]),
        "feature_normalization": hparams["normalize_features"] or "none",
        "raw_feature_rows_summing_below_1": rows_summing_below_one(data.x),
        "directed_edges": edge_index.size(1),
        **{k.removesuffix("_mask"): None if m is None else int(m.sum()) for k, m in masks.items()},
    }
    return graph, stats


def preprocess(
    dataset: str, raw_root: Path = RAW_ROOT, out_root: Path = PROCESSED_ROOT, stats_root: Path = STATS_ROOT
) -> dict:
    """Run the whole stage for one dataset; returns the stats it wrote."""
    hparams = config.hparams_for(config.load_params(), dataset)
    data = read_raw(dataset, raw_root)
    graph, stats = build_graph(data, hparams)
    save_torch(graph, out_root / dataset / "graph.pt")
    save_torch(sparse_features(data.x, False), out_root / dataset / paths.FEATURES_AS_READ)
    write_text_atomic(stats_root / f"{dataset}.json", json.dumps(stats, indent=2) + "\n")
    write_text_atomic(paths.class_counts_file(dataset, stats_root), json.dumps(class_counts(graph)) + "\n")
    return stats


# ---------------------------------------------------------------- used by later stages


def load_graph(dataset: str, root: Path | str = PROCESSED_ROOT) -> dict:
    """Load the graph.pt this stage wrote for `dataset`."""
    path = Path(root) / dataset / "graph.pt"
    if not path.is_file():
        raise DataError(
            f"{path}: processed graph missing; run the preprocess stage first "
            f"(python -m pipeline.preprocess {dataset})"
        )
    try:
        return torch.load(path, weights_only=True)
    except Exception as err:  # a truncated or overwritten file: say which, and how to rebuild it
        raise DataError(f"{path}: unreadable ({type(err).__name__}); rebuild it with "
                        f"`dvc repro --force preprocess@{dataset}`") from None


def load_features_as_read(dataset: str, root: Path | str = PROCESSED_ROOT) -> Tensor:
    """The features as read (sparse COO), before any row normalisation."""
    path = Path(root) / dataset / paths.FEATURES_AS_READ
    if not path.is_file():
        raise DataError(f"{path}: features as read missing; rebuild them with `dvc repro --force preprocess@{dataset}`")
    return torch.load(path, weights_only=True)


# ---------------------------------------------------------------- command line


def main(argv: list[str]) -> None:
    """`python -m pipeline.preprocess <dataset>`: one dataset per call (one DVC matrix entry)."""
    if len(argv) != 1 or argv[0] not in config.DATASETS:
        raise ConfigError(
            f"usage: python -m pipeline.preprocess <dataset>; got {argv!r}; "
            f"allowed datasets: {', '.join(config.DATASETS)}"
        )
    stats = preprocess(argv[0])
    print(f"{argv[0]}: {json.dumps(stats)}", file=sys.stderr)


if __name__ == "__main__":
    config.run_main(main, kept="no file is left half-written")
