"""What will be trained, and roughly how long it will take, said before any training starts.

The estimate is the committed run's own measurement of the same cell (``reports/eval/<dataset>/
<method>.csv``: wall time per seed-epoch and epochs per seed) times the seeds to train; a cell
never run borrows its dataset's CAD-Net figure and says so (Photo APPNP's first run was
estimated at 9 min from it and took 84). Those figures come from the machine that
produced the committed run (reports/timing.md names it; a figure measured on a GPU says so);
a GPU is much faster on the large graphs, a slower laptop slower. Torch-free, so the check
stage can print the whole plan quickly; the train stage repeats its own line with the seeds it actually reuses.
"""
from __future__ import annotations

import csv
from pathlib import Path

from pipeline.paths import EVAL_ROOT
from pipeline.progress import duration


def measured_per_seed(dataset: str, method: str, eval_root: Path = EVAL_ROOT,
                      device: str = "cpu") -> tuple[float, str] | None:
    """(seconds per seed, whose figure: it says so where it is another method's) from the
    committed per-seed table, or None. Where its seeds ran on several devices, only the seeds of ``device``'s kind (``cpu``, ``cuda``) count
    when there are any: a CPU's and a GPU's times are not averaged."""
    for source in (method, "cadnet"):
        table = eval_root / dataset / f"{source}.csv"
        if not table.is_file():
            continue
        with open(table, newline="") as handle:
            rows = list(csv.DictReader(handle))
        same_kind = [r for r in rows if (r.get("device") or "cpu").split(" ")[0] == device]
        rows = same_kind or rows
        try:
            seconds = [float(r["ms_per_seed_epoch"]) * int(r["epochs_run"]) / 1000 for r in rows]
        except (KeyError, ValueError):
            continue
        devices = sorted({r.get("device") or "cpu" for r in rows})
        where = "" if devices == ["cpu"] else f" on {', '.join(devices)}"  # a GPU's figure is no CPU's
        borrowed = "" if source == method else (
            "; this cell has no figure of its own, and another method's epoch can cost several times CAD-Net's")
        if seconds:
            return sum(seconds) / len(seconds), f"{dataset}/{source}{where}{borrowed}"
    return None


def estimate(dataset: str, method: str, seeds: int, eval_root: Path = EVAL_ROOT,
             measured: tuple[float, str] | None = None, device: str = "cpu") -> str:
    """``~12 min (at the committed run's 7.2 s per seed of cora/cadnet)``, or why there is none
    (``measured``: :func:`measured_per_seed`'s answer, where the caller has it already)."""
    if seeds == 0:
        return "nothing to train"
    measured = measured or measured_per_seed(dataset, method, eval_root, device)
    if measured is None:
        return f"no measured figure for {dataset} yet (run `python -m pipeline.bench --datasets {dataset}`)"
    per_seed, source = measured
    return f"~{duration(per_seed * seeds)} (at the committed run's {per_seed:.1f} s per seed of {source})"
