"""The README: its tables are the committed results, its text is wrapped, and the repository
speaks of the project, not of how it was developed. (Its commands are run by
tests/test_pipeline_e2e.py, which lists them in README_COMMANDS.)"""
from __future__ import annotations

import re
import subprocess

import pytest

from conftest import PROJECT_ROOT, readme_commands
from pipeline import readme
from pipeline.config import ConfigError, DataError
from test_pipeline_e2e import README_COMMANDS

README = (PROJECT_ROOT / "README.md").read_text()
RESULTS = (PROJECT_ROOT / "reports/results.md").read_text()


def test_the_readmes_tables_are_those_of_the_committed_results():
    assert readme.refreshed(README, RESULTS) == README, "run `python -m pipeline.readme`"
    assert len(readme.BLOCK.findall(README)) == 3
    for heading in ("## At a glance", "## Table 2: CAD-Net and the baselines"):
        assert readme.sections(RESULTS)[heading] in README


def test_a_stale_table_is_replaced_and_an_unknown_section_named():
    results = "# r\n\n## A\n\nnew\n| 1 |\n\n## B\n\nother\n"
    text = "intro\n<!-- from reports/results.md: ## A -->\nold\n<!-- end -->\nafter\n"
    assert readme.refreshed(text, results) == "intro\n<!-- from reports/results.md: ## A -->\nnew\n| 1 |\n<!-- end -->\nafter\n"
    with pytest.raises(DataError) as info:
        readme.refreshed(text.replace("## A", "## C"), results)
    assert "no section '## C'" in str(info.value) and "## A, ## B" in str(info.value)


def test_the_command_writes_the_readme_only_when_a_table_moved(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/results.md").write_text("# r\n\n## A\n\nnew\n")
    (tmp_path / "README.md").write_text("<!-- from reports/results.md: ## A -->\nold\n<!-- end -->\n")
    readme.main([])
    assert (tmp_path / "README.md").read_text() == "<!-- from reports/results.md: ## A -->\nnew\n<!-- end -->\n"
    readme.main([])
    assert "already up to date" in capsys.readouterr().out
    with pytest.raises(ConfigError):
        readme.main(["extra"])


def _prose_lines(text: str) -> list[str]:
    """Lines outside code blocks, tables and HTML comments."""
    lines, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and not line.startswith(("|", "<!--")):
            lines.append(line)
    return lines


def test_the_readmes_prose_and_the_notes_are_wrapped():
    notes = (PROJECT_ROOT / "docs/notes.md").read_text()
    long = [line for line in _prose_lines(README) + _prose_lines(notes) if len(line) > 100]
    assert not long, long


def test_the_readme_has_a_table_of_contents_that_points_at_its_sections():
    contents = README.split("## Contents", 1)[1].split("\n## ", 1)[0]
    anchors = re.findall(r"\]\(#([a-z0-9-]+)\)", contents)
    headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                for h in re.findall(r"^#{2,3} (.+)$", README, re.M)}
    assert len(anchors) >= 8 and set(anchors) <= headings, set(anchors) - headings


def test_every_command_the_readme_shows_is_run_by_the_suite():
    """README_COMMANDS are the commands the end-to-end tests run verbatim (each looked up in the
    README by `readme_command`, so an edited command fails there); a README command missing
    from it fails here."""
    shown = readme_commands(README)
    assert shown <= set(README_COMMANDS), sorted(shown - set(README_COMMANDS))
    assert set(README_COMMANDS) <= shown, sorted(set(README_COMMANDS) - shown)


HISTORY = re.compile(r"(?<!early )(?<!early_)(?<!early-)\bstops? [0-9]+\b|\bthis stop\b|\b(this|that|a later|an earlier|the last) session\b|"
                     r"\bCI simulation\b|since commit [0-9a-f]{7}", re.I)


def test_the_repository_speaks_of_the_project_not_of_how_it_was_developed():
    files = subprocess.run(["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    found = []
    for name in files:
        if name == "dvc.lock" or not name.endswith((".md", ".py", ".yaml", ".txt", ".toml", ".tsv")):
            continue
        for number, line in enumerate((PROJECT_ROOT / name).read_text(errors="replace").splitlines(), 1):
            if HISTORY.search(line) and name != "tests/test_readme.py":
                found.append(f"{name}:{number}: {line.strip()[:80]}")
    assert not found, found


def test_the_readmes_set_up_commands_are_the_ones_ci_runs():
    """CI runs the README's test command as written; the main job's differs from it only in
    what it installs and runs."""
    main_job, tests = README_COMMANDS[:2]
    assert tests in (PROJECT_ROOT / ".ci/run").read_text().replace("pip install -q ", "pip install ").splitlines()
    assert main_job == tests.replace("pip install -e '.[test]'", "pip install -e .").replace("&& pytest", "&& dvc repro")
