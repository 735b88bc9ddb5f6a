"""The committed dvc.lock against the committed code, params and reports.

Every stage's entry must record the code, params and outputs that are in git, so that `dvc status`
on a clone lists nothing but the data a clone lacks: the raw files and the graphs built from them,
which live in DVC's cache (no DVC remote holds them here) and come back with `dvc repro`. A change
of code or params that is not recorded fails here; record it by running the stages it concerns
(`dvc repro`), whose outputs are then those of the code in git.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from conftest import PROJECT_ROOT

# What a clone lacks: the download and preprocess stages' outputs (DVC-cached, not in git)
MISSING_ON_A_CLONE = ("data/raw/", "data/processed/")


def disagreements(status: dict) -> dict[str, list[str]]:
    """Of `dvc status --json`, every change that is not a missing raw file or graph."""
    found: dict[str, list[str]] = {}
    for stage, changes in status.items():
        for change in changes:
            if not isinstance(change, dict):  # "changed command", "always changed"
                found.setdefault(stage, []).append(str(change))
                continue
            for kind, paths in change.items():
                for path, state in paths.items():
                    missing = path.startswith(MISSING_ON_A_CLONE) and state in ("deleted", "not in cache")
                    if not missing:
                        found.setdefault(stage, []).append(f"{kind}: {path} {state}")
    return found


def test_disagreements_are_what_is_not_a_missing_raw_file_or_graph():
    status = {"download@cora": [{"changed outs": {"data/raw/cora": "deleted"}}],
              "preprocess@cora": [{"changed deps": {"data/raw/cora": "deleted", "pipeline/preprocess.py": "modified"}},
                                  {"changed outs": {"data/processed/cora": "not in cache"}}],
              "check": [{"changed deps": {"params.yaml": {"beta": "modified"}}}], "stats": ["changed command"]}
    assert disagreements(status) == {"preprocess@cora": ["changed deps: pipeline/preprocess.py modified"],
                                     "check": ["changed deps: params.yaml {'beta': 'modified'}"],
                                     "stats": ["changed command"]}


def test_the_committed_lock_records_the_committed_code_params_and_reports():
    proc = subprocess.run([sys.executable, "-m", "dvc", "status", "--json"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = disagreements(json.loads(proc.stdout))
    listed = "; ".join(f"{stage}: {', '.join(changes)}" for stage, changes in sorted(found.items())[:5])
    assert not found, (f"dvc.lock disagrees with the repository in {len(found)} stages ({listed}); "
                       f"run `dvc repro` and commit dvc.lock with what it wrote")


def test_the_lock_holds_the_stages_of_dvc_yaml_and_no_others():
    """DVC keeps the entry of a stage that left dvc.yaml (a method moved to another study, say);
    such an entry records nothing that runs, so the lock is kept free of them."""
    proc = subprocess.run([sys.executable, "-m", "dvc", "stage", "list", "--name-only"], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    recorded = set(yaml.safe_load((PROJECT_ROOT / "dvc.lock").read_text())["stages"])
    stale = sorted(recorded - set(proc.stdout.split()))
    assert not stale, f"dvc.lock holds {len(stale)} entries of stages dvc.yaml no longer has ({', '.join(stale[:4])}); delete them"
