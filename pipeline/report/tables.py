"""A cell's tables and its summary: what the train stage writes from the seeds into its family's
folder ``reports/eval/<dataset>/<method>/`` (``<cell>.csv``, one row per seed;
``<cell>_gamma.csv``; ``<cell>_epochs.csv``, one row per epoch; ``_written.json``, the spec each
cell's tables were written from), what the evaluate stage writes from the per-seed tables
(``reports/eval/<dataset>/<method>.json``, a summary per cell), and what stats, plot and curves
read back from git.

Those files are committed and outlive the seed files they came from, so the readers verify
them before use: the table must hold the seeds asked for, once each, with accuracies that are
fractions and epochs that fit together, and the summary must be the one this table gives. A
table or summary edited, truncated or mixed up after the pipeline wrote it is one line naming the
file, never a number in the results.
"""
from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.config import DataError
from pipeline.engine.spec import cell_name, spec_hash
from pipeline.files import write_text_atomic
from pipeline.paths import EVAL_ROOT

# ms_per_seed_epoch: wall time of an epoch (training step and eval pass) divided by the seeds
# trained together; one seed at a time, simply the epoch's wall time.
PER_SEED_COLUMNS = [
    "seed", "test_acc", "val_acc", "best_val_loss", "selected_epoch", "epochs_run",
    "ms_per_seed_epoch", "gamma_mean", "engine", "device",
]
NUMERIC_COLUMNS = ["seed", "test_acc", "val_acc", "best_val_loss", "selected_epoch", "epochs_run", "ms_per_seed_epoch"]
# What each epoch's row says of the seeds that ran it (a seed that stopped early leaves the rows
# after its last epoch): how many ran it, and the mean and 10th and 90th percentiles of each loss.
EPOCH_COLUMNS = ["epoch", "seeds_running"] + [f"{part}_loss_{stat}" for part in ("train", "val")
                                              for stat in ("mean", "p10", "p90")] + ["val_acc_mean"]
GAMMA_BINS = 50
# seeds saved before records named their device were all trained on this project's CPU machines
DEVICE_BEFORE_RECORDED = "cpu"
# The summary is rounded to 4 decimals of a percent from full-precision accuracies; the table
# keeps 6 significant digits, so the two may differ in the 4th decimal and no more.
SUMMARY_TOLERANCE = 1e-3


def summarize(table: pd.DataFrame) -> dict:
    """Mean and sample standard deviation (as the authors' ``torch.std``), in percent."""
    acc = 100.0 * table["test_acc"]
    return {
        "runs": int(len(table)),
        "test_acc": {"mean": round(float(acc.mean()), 4), "std": round(float(acc.std(ddof=1)) if len(acc) > 1 else 0.0, 4)},
        "ms_per_seed_epoch": round(float(table["ms_per_seed_epoch"].mean()), 3),
        "epochs_run": round(float(table["epochs_run"].mean()), 2),
    }


def per_seed_table(records: list[dict]) -> pd.DataFrame:
    """One row per seed record of :func:`pipeline.engine.loop.train_chunk`."""
    rows = [{**{k: r[k] for k in PER_SEED_COLUMNS if k in r}, "gamma_mean": float(np.asarray(r["gamma"]).mean()),
             "device": r.get("device", DEVICE_BEFORE_RECORDED)} for r in records]
    return pd.DataFrame(rows, columns=PER_SEED_COLUMNS)


def gamma_histogram(records: list[dict]) -> pd.DataFrame:
    """Counts of gamma over nodes, pooled over all seeds and for the first seed alone (paper Fig. B.3)."""
    pooled = np.concatenate([np.asarray(r["gamma"]).ravel() for r in records])
    low, high = float(pooled.min()), float(pooled.max())
    if high - low < 1e-6:  # beta = 1 puts every gamma at 1
        low, high = low - 0.005, high + 0.005
    counts, edges = np.histogram(pooled, bins=GAMMA_BINS, range=(low, high))
    first = min(records, key=lambda r: r["seed"])
    counts_first, _ = np.histogram(np.asarray(first["gamma"]).ravel(), bins=edges)
    return pd.DataFrame({"bin_left": edges[:-1], "bin_right": edges[1:], "count_all_seeds": counts,
                         f"count_seed_{first['seed']}": counts_first})


def epoch_summary(records: list[dict]) -> pd.DataFrame:
    """Per epoch, over the seeds that ran it: their number and their losses' mean and 10-90%
    spread (:data:`EPOCH_COLUMNS`), from each record's per-epoch history."""
    history = pd.concat([pd.DataFrame(r["history"]).assign(epoch=range(1, len(r["history"]["val_loss"]) + 1))
                         for r in records], ignore_index=True)
    by_epoch = history.groupby("epoch")
    table = pd.DataFrame({"seeds_running": by_epoch.size()})
    for part in ("train", "val"):
        column = by_epoch[f"{part}_loss"]
        table[f"{part}_loss_mean"] = column.mean()
        table[f"{part}_loss_p10"] = column.quantile(0.1)
        table[f"{part}_loss_p90"] = column.quantile(0.9)
    table["val_acc_mean"] = by_epoch["val_acc"].mean()
    return table.reset_index()[EPOCH_COLUMNS]


WRITTEN_NAME = "_written.json"  # no cell is named so (config.STUDY_NAME)


def family_tables(dataset: str, method: str, root: Path = EVAL_ROOT) -> Path:
    """The train stage's output folder for one (dataset, method) family."""
    return root / dataset / method


def table_paths(dataset: str, method: str, name: str, root: Path = EVAL_ROOT) -> dict[str, Path]:
    folder = family_tables(dataset, method, root)
    return {"per_seed": folder / f"{name}.csv", "gamma": folder / f"{name}_gamma.csv",
            "epochs": folder / f"{name}_epochs.csv"}


def read_written(dataset: str, method: str) -> dict[str, dict]:
    """Of each cell whose tables the family's folder holds, what they were written from: the hash
    of the cell's spec (:func:`pipeline.engine.spec.spec_hash`) and the checksum of the tables as
    written; nothing where the record is missing or unreadable."""
    path = family_tables(dataset, method) / WRITTEN_NAME
    try:
        written = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return written if isinstance(written, dict) else {}


def write_written(dataset: str, method: str, written: dict[str, dict]) -> None:
    write_text_atomic(family_tables(dataset, method) / WRITTEN_NAME, json.dumps(written, indent=1, sort_keys=True) + "\n")


def written_record(dataset: str, method: str, spec: dict) -> dict:
    """What the cell's tables as they are now record: its spec's hash and their checksum (None
    where one is missing), so that a table edited after train wrote it is written again."""
    checksum = hashlib.sha256()
    for path in table_paths(dataset, method, cell_name(spec)).values():
        if not path.exists():
            return {"spec": spec_hash(spec), "tables": None}
        checksum.update(path.read_bytes())
    return {"spec": spec_hash(spec), "tables": checksum.hexdigest()[:16]}


def tables_hold(dataset: str, method: str, spec: dict, written: dict[str, dict]) -> bool:
    """The cell's committed tables are those train wrote under ``spec``: nothing to train or write."""
    record = written_record(dataset, method, spec)
    return record["tables"] is not None and written.get(cell_name(spec)) == record


def per_seed_path(dataset: str, method: str, name: str, root: Path = EVAL_ROOT) -> Path:
    return table_paths(dataset, method, name, root)["per_seed"]


def summaries_path(dataset: str, method: str, root: Path = EVAL_ROOT) -> Path:
    """The evaluate stage's output for one family: ``{cell: summary}``."""
    return root / dataset / f"{method}.json"


def read_per_seed(dataset: str, method: str, name: str, runs: int | None = None, root: Path = EVAL_ROOT,
                  with_summary: bool = True) -> pd.DataFrame:
    """One cell's per-seed table, verified (:func:`check_table`) and, ``with_summary``, checked
    against its summary (:func:`check_summary`); with ``runs``, it must hold seeds 0 .. runs-1
    once each."""
    path = per_seed_path(dataset, method, name, root)
    rerun = f"rerun `dvc repro` for {dataset}/{method}"
    if not path.exists():
        raise DataError(f"{path}: missing; {rerun}")
    try:
        text = path.read_text()
        table = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a per-seed table ({type(err).__name__}); {rerun}") from None
    if not text.endswith("\n"):  # train ends every row with one
        raise DataError(f"{path}: cut short in its last row; {rerun}")
    check_table(path, table, runs, rerun)
    if with_summary:
        check_summary(summaries_path(dataset, method, root), name, table, rerun)
    return table


def check_table(path: Path, table: pd.DataFrame, runs: int | None, rerun: str) -> None:
    missing = [c for c in PER_SEED_COLUMNS if c not in table.columns]
    if missing:
        raise DataError(f"{path}: column {missing[0]!r} missing; {rerun}")
    empty = table[PER_SEED_COLUMNS].isna().any()
    if empty.any():
        raise DataError(f"{path}: column {empty.idxmax()!r} has an empty field; {rerun}")
    for column in NUMERIC_COLUMNS:
        values = pd.to_numeric(table[column], errors="coerce")
        if values.isna().any():
            row = int(values.isna().to_numpy().argmax())
            raise DataError(f"{path}: {column} of row {row + 1} is {table[column].iloc[row]!r}, not a number; {rerun}")
    for column in ("test_acc", "val_acc"):
        outside = ~table[column].between(0, 1)
        if outside.any():
            row = int(outside.to_numpy().argmax())
            raise DataError(f"{path}: {column} of seed {table['seed'].iloc[row]} is {table[column].iloc[row]}, "
                            f"not a fraction in [0, 1]; {rerun}")
    bad_epochs = (table["selected_epoch"] < 0) | (table["selected_epoch"] > table["epochs_run"])
    if bad_epochs.any():
        row = int(bad_epochs.to_numpy().argmax())
        raise DataError(f"{path}: seed {table['seed'].iloc[row]} selected epoch {table['selected_epoch'].iloc[row]} "
                        f"of {table['epochs_run'].iloc[row]} run; {rerun}")
    runs = len(table) if runs is None else runs  # a cell's seeds are always 0 .. runs-1
    if sorted(table["seed"].tolist()) != list(range(runs)):
        seeds = table["seed"]
        raise DataError(f"{path}: holds {len(seeds)} rows of {seeds.nunique()} distinct seeds, not seeds "
                        f"0-{runs - 1} once each; {rerun}")


def check_summary(path: Path, name: str, table: pd.DataFrame, rerun: str) -> None:
    """The summary evaluate wrote for the cell ``name`` must be its table's own."""
    if not path.exists():
        raise DataError(f"{path}: missing beside its per-seed tables; {rerun}")
    try:
        summaries = json.loads(path.read_text())
        if name not in summaries:
            raise DataError(f"{path}: holds no summary of {name}; {rerun}")
        summary = summaries[name]
        if summary == {"runs": 0} and table.empty:  # a cell set to 0 runs: nothing to summarise
            return
        written = (int(summary["runs"]), float(summary["test_acc"]["mean"]), float(summary["test_acc"]["std"]))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise DataError(f"{path}: not a summary evaluate wrote ({type(err).__name__}); {rerun}") from None
    own = summarize(table)
    recomputed = (own["runs"], own["test_acc"]["mean"], own["test_acc"]["std"])
    if written[0] != recomputed[0] or any(abs(a - b) > SUMMARY_TOLERANCE for a, b in zip(written[1:], recomputed[1:])):
        raise DataError(f"{path}: says {written[0]} runs, {written[1]} ± {written[2]} for {name}, but "
                        f"{name}.csv gives {recomputed[0]} runs, {recomputed[1]} ± {recomputed[2]}: "
                        f"one was changed after evaluate wrote them; {rerun}")
