"""pipeline/provenance.py: reports/RUNS.md from the per-seed tables and the git history."""
from __future__ import annotations

import subprocess

from pipeline import provenance


def _git(root, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": "2026-11-20T10:00:00",
           "GIT_COMMITTER_DATE": "2026-11-20T10:00:00", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def test_each_cell_gets_its_seeds_machines_time_and_last_commit(evaluated):
    """Three fake seeds on cpu, of 5, 6 and 7 epochs, here at 10 s per seed-epoch: 180 s."""
    table = evaluated / "reports/eval/cora/cadnet.csv"
    table.write_text(table.read_text().replace(",10,", ",10000,").replace(",11,", ",10000,").replace(",12,", ",10000,"))
    _git(evaluated, "init", "-q")
    _git(evaluated, "add", "reports")
    _git(evaluated, "commit", "-q", "-m", "results")
    commit = _git(evaluated, "log", "-1", "--format=%h").strip()
    provenance.main([])
    rows = [line for line in (evaluated / "reports/RUNS.md").read_text().splitlines() if line.startswith("| cora")]
    assert rows == [f"| cora | cadnet | 3 | cpu (3) | batched (chunk of 3) | 3.0 min | 2026-11-20 ({commit}) |"]


def test_outside_git_the_date_is_a_dash(evaluated):
    assert provenance.last_change(evaluated / "reports/eval/cora/cadnet.csv") == "-"
