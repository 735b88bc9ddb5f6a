"""The seed store: a cache of finished seeds outside DVC, one file per seed in
``data/runs/<dataset>/<method>/<cell>/seed_NNN.pt``.

Each file records its seed, dataset, method and the identity of its cell's spec
(:func:`pipeline.engine.spec.seed_identity`: settings, data and code versions), so an interrupted
run keeps its finished seeds and a rerun trains only the missing ones. Nothing trained is
deleted: seed files of other settings (or beyond ``runs``) are moved to
``data/stash/<dataset>/<method>/<identity>/`` and moved back when those settings return, so a
quick look with ``-S runs=10``, a bad value, or an experiment costs no finished seed. A cell
copies the seeds of a twin cell (another study's cell of the same identity) rather than training
them again, and a lock keeps two processes from training one family at once.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import shutil
from pathlib import Path

from pipeline.engine.loop import TrainingError
from pipeline.files import meant_name, read_record, save_torch, write_atomic
from pipeline.paths import LOCKS_ROOT, RUNS_ROOT, STASH_ROOT, seed_file

SEED_FILE = re.compile(r"seed_(\d+)\.pt")


def seed_number(path: Path) -> int | None:
    match = SEED_FILE.fullmatch(path.name)
    return int(match.group(1)) if match else None


def holds_seed(record: dict | None, seed: int, dataset: str, method: str, fingerprint: str) -> bool:
    """The record is seed ``seed`` of this dataset and method, made with this fingerprint
    (a copied or renamed seed file is not counted as another seed)."""
    return (record is not None and record.get("fingerprint") == fingerprint and record.get("seed") == seed
            and record.get("dataset", dataset) == dataset and record.get("method", method) == method)


def sync_seeds(dataset: str, method: str, runs: int, fingerprint: str,
               run_dir: Path, stash_dir: Path | None = None, twins: frozenset[str] = frozenset()) -> list[int]:
    """Make ``run_dir`` hold exactly the finished seeds ``0 .. runs-1`` of ``fingerprint`` and
    return the seeds still to train. Seed files of other settings, and seeds ``>= runs``, go to
    ``stash_dir/<their fingerprint>/``; seeds of this fingerprint come back from there, or are
    copied from a twin cell (:func:`twin_cells`): one of this identity, or of one in ``twins``
    (the same network with a default written out, :func:`pipeline.engine.cells.twin_identities`),
    whose copy then records this identity."""
    stash_dir = stash_dir or STASH_ROOT / dataset / method
    run_dir.mkdir(parents=True, exist_ok=True)
    done = set()
    for path in sorted(p for p in run_dir.iterdir() if p.is_file()):
        if meant_name(path):  # a write of files.write_atomic that never finished: never a finished seed
            path.unlink()
            continue
        seed, record = seed_number(path), read_record(path)
        if seed is not None and seed < runs and holds_seed(record, seed, dataset, method, fingerprint):
            done.add(seed)
        else:
            set_aside(path, record, stash_dir)
    stashed = stash_dir / fingerprint
    for seed in range(runs):
        kept = seed_file(stashed, seed)
        if seed not in done and kept.exists() and holds_seed(read_record(kept), seed, dataset, method, fingerprint):
            shutil.move(kept, seed_file(run_dir, seed))
            done.add(seed)
    missing = [s for s in range(runs) if s not in done]
    for twin_dir in twin_cells(run_dir, {fingerprint} | twins) if missing else []:
        for seed in missing:
            twin = seed_file(twin_dir, seed)
            record = read_record(twin) if seed not in done and twin.exists() else None
            if record is None:
                continue
            if holds_seed(record, seed, dataset, method, fingerprint):
                write_atomic(seed_file(run_dir, seed), functools.partial(shutil.copyfile, twin))
                done.add(seed)
            elif any(holds_seed(record, seed, dataset, method, identity) for identity in twins):
                save_torch({**record, "fingerprint": fingerprint}, seed_file(run_dir, seed))
                done.add(seed)
    return [s for s in range(runs) if s not in done]


def twin_cells(run_dir: Path, fingerprints: set[str]) -> list[Path]:
    """The seed folders of the family's other cells that train under one of ``fingerprints`` (a
    study point that is another study's cell: β at the dataset's own value is Table 2's cell),
    whose seeds this cell copies rather than trains again. One file of each tells."""
    twins = []
    for other in sorted(p for p in run_dir.parent.iterdir() if p.is_dir() and p != run_dir):
        first = next(iter(sorted(other.glob("seed_*.pt"))), None)
        if first is not None and (read_record(first) or {}).get("fingerprint") in fingerprints:
            twins.append(other)
    return twins


def stash_loose_seeds(dataset: str, method: str) -> None:
    """Seed files that lie in the family's folder itself (data/runs/<dataset>/<method>/seed_NNN.pt,
    the layout from before a family held several cells) go to the stash under their identity,
    from where the cell of that spec takes them back (:func:`sync_seeds`)."""
    family_dir = RUNS_ROOT / dataset / method
    for path in sorted(family_dir.glob("seed_*.pt")) if family_dir.is_dir() else []:
        set_aside(path, read_record(path), STASH_ROOT / dataset / method)


def set_aside(path: Path, record: dict | None, stash_dir: Path) -> None:
    """A seed file into ``stash_dir/<its fingerprint>/``, where a run of its settings finds it."""
    owner = "unreadable" if record is None else str(record.get("fingerprint", "unknown"))
    kept = stash_dir / owner / path.name
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(path, kept)


def order_seeds(spec: dict, fingerprint: str, run_dir: Path, twins: frozenset[str] = frozenset()) -> list[int]:
    """The cell's finished seeds in its folder of data/runs, every other seed file in the stash;
    the seeds still to train."""
    stash_loose_seeds(spec["dataset"], spec["method"])
    return sync_seeds(spec["dataset"], spec["method"], spec["runs"], fingerprint, run_dir=run_dir, twins=twins)


def has_seed_files(dataset: str, method: str) -> bool:
    return any(next((root / dataset / method).rglob("seed_*.pt"), None) for root in (RUNS_ROOT, STASH_ROOT))


def load_records(run_dir: Path, dataset: str, method: str, runs: int, fingerprint: str) -> list[dict]:
    """Seeds ``0 .. runs-1`` of the cell from ``run_dir``, each the seed its file name says, of
    this cell and identity: a missing, copied or mixed-in seed file is an error, never a row
    counted twice or a number of other settings."""
    records = []
    for seed in range(runs):
        path = seed_file(run_dir, seed)
        record = read_record(path)
        if not holds_seed(record, seed, dataset, method, fingerprint):
            raise TrainingError(f"{path}: missing or not seed {seed} of {dataset}/{method} under its spec; "
                                f"run `dvc repro train@{dataset}-{method}` again")
        records.append(record)
    return records


@contextlib.contextmanager
def family_lock(dataset: str, method: str, where: str):
    """Hold the family while training it: a second train of it (another `dvc repro`, the queue)
    is refused instead of training the same seeds twice. The system drops the lock when the
    process ends, however it ends."""
    LOCKS_ROOT.mkdir(parents=True, exist_ok=True)
    with open(LOCKS_ROOT / f"{dataset}-{method}.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise TrainingError(f"{where}: {holder} is training this cell now; wait for it to finish "
                                f"or stop it, then run this again") from None
        handle.truncate(0)
        handle.write(f"process {os.getpid()}")
        handle.flush()
        yield
