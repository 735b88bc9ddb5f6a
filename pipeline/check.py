"""Check stage: ``python -m pipeline.check``. Validates all of params.yaml, then says what
`dvc repro` will train and roughly how long that takes, before anything else runs.

Every other stage depends on this stage's output, so DVC runs it first: a bad value stops
`dvc repro` before DVC deletes any stage's outputs (it removes them just before running a
stage's command, so a stage's own one-line error comes too late to save them). It depends on
params.yaml as a file, not on chosen keys, so every edit is checked: a misspelled top-level key
that no stage lists, or ``true`` turned into ``1`` (DVC compares param values with ``==``).
Its output holds the same line whatever the values, so it never makes a later stage rerun:
each of those reruns for the params it lists itself.

It also writes each cell's number of seeds to ``data/seed_counts/<dataset>/<method>.txt``,
the file that cell's train and evaluate stages depend on instead of the ``runs`` keys. DVC
can only track a params subtree whole, and a cell's count is resolved from four of them
(``runs``, ``runs_by_dataset``, ``variants.runs``, ``baselines.runs``), so as params deps
``-S baselines.runs.photo.gat=25`` would rerun every cell's stages; as a file, only the
cells whose count moved. A cell whose registry entry reads another method's settings
(``hparams_of``: ``mixhop_l2`` reads ``method_hparams.mixhop``) has a second line, a fingerprint
of its resolved settings: its stages list only its own block as params, so this line is what
reruns them when the block they read changes.
"""
from __future__ import annotations

import sys

from pipeline import config, plan
from pipeline.methods import REGISTRY
from pipeline.paths import CHECKED_FILE, PARAMS_FILE, seed_count_file
from pipeline.progress import duration


def resolve_device_name(name: str) -> str:
    """``auto``/``cpu``/``cuda`` -> the device training will use; ``cuda`` without one is an error."""
    if name == "cpu":
        return "cpu"
    import torch  # only for the question whether CUDA is there

    if torch.cuda.is_available():
        return "cuda"
    if name == "cuda":
        raise config.ConfigError("device: 'cuda' asked for but no CUDA device is available; "
                                 "allowed values here: auto, cpu")
    return "cpu"


def plan_lines(params: dict, device: str) -> list[str]:
    cells = config.cells(params)
    lines = [f"dvc repro will train {len(cells)} cells on {device}; seeds already trained with the same "
             f"settings are reused (each train stage says how many), so these times are upper bounds:"]
    total, unknown = 0.0, 0
    memory = plan.machine_memory_bytes() if device == "cpu" else None
    baselines = config.baseline_methods(params)
    for dataset, method in cells:
        runs = config.runs_for(params, dataset, method)
        if runs == 0:
            lines.append(f"  {dataset}/{method}: not run (runs 0)")
            continue
        single = params.get("engine", "batched") == "single" or not REGISTRY[method].batched
        side_by_side = plan.workers_side_by_side(single, device, params.get("n_jobs", -1))
        measured = plan.measured_per_seed(dataset, method, device=device, baselines=baselines)
        lines.append(f"  {dataset}/{method}: {runs} seeds, "
                     + plan.estimate(dataset, method, runs, measured=measured, side_by_side=side_by_side))
        warning = plan.memory_warning(dataset, method, memory)
        if warning:
            lines.append(f"    {warning}")
        if measured is None:
            unknown += 1
        else:
            total += measured[0] * runs / plan.seeds_at_once(runs, side_by_side)
    lines.append(f"  all cells: ~{duration(total)} at the committed run's speed"
                 + (f", plus {unknown} cells without a measured figure" if unknown else ""))
    return lines


def main(argv: list[str]) -> None:
    params = config.load_params()
    config.check_everything(params)
    device = resolve_device_name(params.get("device", "auto"))
    print("\n".join(plan_lines(params, device)), file=sys.stderr)
    for dataset, method in config.cells(params):
        counts = seed_count_file(dataset, method)
        counts.parent.mkdir(parents=True, exist_ok=True)
        text = f"runs: {config.runs_for(params, dataset, method)}\n"
        base = REGISTRY[method].hparams_of
        if base:  # its stage's params deps list its own block; this line stands for the one it reads
            text += f"settings read from method_hparams.{base}: {config.fingerprint(config.hparams_for(params, dataset, method))}\n"
        counts.write_text(text)
    CHECKED_FILE.parent.mkdir(parents=True, exist_ok=True)
    CHECKED_FILE.write_text(f"{PARAMS_FILE}: valid\n")


if __name__ == "__main__":
    config.run_main(main)
