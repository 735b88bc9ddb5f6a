"""pipeline/provenance.py: reports/RUNS.md from the per-seed tables and the git history."""
from __future__ import annotations

import subprocess

from pipeline import provenance


def _git(root, *args, date="2026-11-20T10:00:00"):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_DATE": date, "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def test_each_cell_gets_its_seeds_machines_time_and_last_commit(evaluated):
    """Three fake seeds on cpu, of 5, 6 and 7 epochs, here at 10 s per seed-epoch: 180 s."""
    table = evaluated / "reports/eval/cora/cadnet/main.csv"
    table.write_text(table.read_text().replace(",10,", ",10000,").replace(",11,", ",10000,").replace(",12,", ",10000,"))
    _git(evaluated, "init", "-q")
    _git(evaluated, "add", "reports")
    _git(evaluated, "commit", "-q", "-m", "results")
    commit = _git(evaluated, "log", "-1", "--format=%h").strip()
    provenance.main([])
    rows = [line for line in (evaluated / "reports/RUNS.md").read_text().splitlines() if line.startswith("| cora")]
    assert rows == [f"| cora | cadnet | main | 3 | cpu (3) | batched (chunk of 3) | 3.0 min | 2026-11-20 ({commit}) |"]
    studies = [line for line in (evaluated / "reports/RUNS.md").read_text().splitlines() if line.startswith("| main")]
    assert studies == ["| main | 1 | 3 | cpu (3) | 3.0 min |"]
    # a table moved whole keeps the date of its numbers; one whose numbers change gets the new one
    (table.parent / "beta").mkdir()
    _git(evaluated, "mv", "reports/eval/cora/cadnet/main.csv", "reports/eval/cora/cadnet/beta/moved.csv")
    _git(evaluated, "commit", "-q", "-m", "moved", date="2026-12-01T10:00:00")
    assert provenance.last_change(table.parent / "beta/moved.csv") == f"2026-11-20 ({commit})"


def test_a_table_changed_since_the_last_commit_is_not_committed(evaluated):
    table = evaluated / "reports/eval/cora/cadnet/main.csv"
    _git(evaluated, "init", "-q")
    _git(evaluated, "add", "reports")
    _git(evaluated, "commit", "-q", "-m", "results")
    assert provenance.last_change(table) == f"2026-11-20 ({_git(evaluated, 'log', '-1', '--format=%h').strip()})"
    table.write_text(table.read_text() + "\n")
    assert provenance.last_change(table) == "not committed"
    new = table.parent / "retrained.csv"
    new.write_text(table.read_text())
    assert provenance.last_change(new) == "not committed"
    # the whole file asks git once for every table: the same answer
    new.unlink()
    rows = [line for line in provenance.runs_markdown().splitlines() if line.startswith("| cora")]
    assert [row.rsplit("|", 2)[1].strip() for row in rows] == ["not committed"]


def test_outside_git_the_date_is_a_dash(evaluated):
    assert provenance.last_change(evaluated / "reports/eval/cora/cadnet/main.csv") == "-"


def test_a_studys_cells_add_up_under_its_name(evaluated):
    """Two cells of one study, 2 seeds each of 1000 epochs at 10 and 11 ms: 2 cells of 2 seeds,
    2 x (10 + 11) x 1000 ms = 42 s."""
    from conftest import fake_record, read_params, write_params, write_tables_of_fake_seeds
    from pipeline import train

    params = read_params(evaluated)
    params["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2, "grid": {"beta": [0.5, 0.9]}}
    write_params(evaluated, params)
    for name in ("beta-beta=0.5", "beta-beta=0.9"):
        train.write_tables("cora", "cadnet", name, [fake_record(s, 0.8, epochs_run=1000) for s in range(2)])
    write_tables_of_fake_seeds(evaluated)
    provenance.main([])
    lines = (evaluated / "reports/RUNS.md").read_text().splitlines()
    assert [line for line in lines if line.startswith("| beta")] == ["| beta | 2 | 2 | cpu (4) | 42 s |"]


def test_the_committed_runs_file_is_current(monkeypatch):
    """reports/RUNS.md holds a row for every committed per-seed table, with its seeds, machines,
    engine and time as the tables give them, and no row left ``not committed``."""
    from conftest import PROJECT_ROOT

    committed = (PROJECT_ROOT / "reports/RUNS.md").read_text()
    assert "| not committed |" not in committed
    monkeypatch.setattr(provenance, "last_change", lambda path, pending=None: "-")

    def without_dates(text):
        return [line.rsplit("|", 2)[0] for line in text.splitlines() if line.startswith("| ")]

    assert without_dates(committed) == without_dates(provenance.runs_markdown(PROJECT_ROOT / "reports/eval"))
