"""Copies the generated tables of ``reports/results.md`` into ``README.md``: ``python -m pipeline.readme``.

The README shows some of the stats stage's sections (the verdict at a glance, Table 2, Table 3).
Each sits between two markers, the first naming the section's heading in results.md::

    <!-- from reports/results.md: ## Table 2: CAD-Net and the baselines -->
    ...
    <!-- end -->

so the README's tables are the committed results, never typed in; a test fails when they
differ. Not a DVC stage: the README is not a pipeline output, and ``dvc exp run`` should not
rewrite it for every experiment.
"""
from __future__ import annotations

import re
from pathlib import Path

from pipeline import config
from pipeline.files import write_text_atomic
from pipeline.paths import RESULTS_FILE

README_FILE = Path("README.md")
BLOCK = re.compile(r"(<!-- from reports/results\.md: (## [^\n]*?) -->\n)(.*?)(<!-- end -->)", re.S)


def sections(results: str) -> dict[str, str]:
    """Each ``## `` heading of results.md and the text under it, up to the next heading."""
    found = {}
    for part in re.split(r"\n(?=## )", results):
        heading, _, body = part.partition("\n")
        if heading.startswith("## "):
            found[heading] = body.strip("\n") + "\n"
    return found


def refreshed(readme: str, results: str) -> str:
    """The README with every marked block replaced by its section of results.md."""
    available = sections(results)

    def copy(match: re.Match) -> str:
        heading = match.group(2)
        if heading not in available:
            raise config.DataError(f"{README_FILE}: no section '{heading}' in {RESULTS_FILE}; "
                                   f"its sections: {', '.join(available)}")
        return f"{match.group(1)}{available[heading]}{match.group(4)}"

    return BLOCK.sub(copy, readme)


def main(argv: list[str]) -> None:
    config.no_args(argv, "readme")
    readme = README_FILE.read_text()
    text = refreshed(readme, RESULTS_FILE.read_text())
    if text != readme:
        write_text_atomic(README_FILE, text)
    print(f"{README_FILE}: {len(BLOCK.findall(text))} tables from {RESULTS_FILE}"
          + ("" if text != readme else " (already up to date)"))


if __name__ == "__main__":
    config.run_main(main)
