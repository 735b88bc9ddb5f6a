"""dvc.yaml against the code: each stage lists, as file dependencies, the pipeline modules its
command imports, so that `dvc repro` reruns a stage whose code changed; a module left out here
must be bookkeeping that cannot change a stage's outputs. A cell's train and evaluate stages are
the exception: their cell's spec (pipeline/engine/spec.py) stands for their code, settings and graph, so
they list it and a committed file of the stage before them (the order), and nothing else."""
from __future__ import annotations

import ast

import pytest
import yaml

from conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "pipeline"

# Modules whose edits cannot change what a stage writes, so they are not dependencies.
BOOKKEEPING = {
    "paths": "where files live: a moved output shows up in `dvc status` as a changed output anyway",
    "progress": "progress bars and printed durations",
    "plan": "the printed plan: its time estimates and memory warnings",
    "check": "for train, the device name only; the check stage's own output is every stage's dependency",
}


def imported_pipeline_modules(module: str) -> set[str]:
    """``module`` and the ``pipeline`` modules it imports itself (imports inside functions
    included), as paths under pipeline/ without ``.py`` (``engine/spec``; a package: its folder,
    ``models``). Not transitively: config imports the method registry to validate names, which
    does not make the download stage depend on the models."""
    def path(dotted: str) -> str:
        return dotted.removeprefix("pipeline").lstrip(".").replace(".", "/")

    found = {module}
    for node in ast.walk(ast.parse((PACKAGE / f"{module}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith("pipeline."):
            package = path(node.module)
            if package and not (PACKAGE / package).is_dir():  # from pipeline.config import X
                found.add(package)
                continue
            for alias in node.names:  # from pipeline[.engine] import plan: a module, or a name of the package
                name = f"{package}/{alias.name}".lstrip("/")
                found.add(name if (PACKAGE / f"{name}.py").exists() else package)
        elif isinstance(node, ast.Import):
            found |= {path(a.name) for a in node.names if a.name.startswith("pipeline.")}
    return found


def covers(deps: list[str], module: str) -> bool:
    """Whether a dependency of ``deps`` (a file, or a folder such as pipeline/models) holds ``module``."""
    listed = {dep.removeprefix("pipeline/").removesuffix(".py") for dep in deps if dep.startswith("pipeline/")}
    return any(module == dep or module.startswith(dep + "/") for dep in listed)


def stages() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())["stages"]


def test_the_import_walk_follows_every_import_form():
    # each import form once: `from pipeline import config`, `from pipeline.engine import plan`,
    # `from pipeline.engine.spec import ...`; stats: `from pipeline.models import ...`
    assert imported_pipeline_modules("check") == {"check", "config", "files", "engine/plan", "paths", "progress",
                                                  "report/tables", "engine/memory", "engine/spec", "engine/device",
                                                  "engine/cells", "engine/store"}
    assert "models" in imported_pipeline_modules("stats")
    # neither stage imports the other: what both need lives in pipeline/engine
    assert "check" not in imported_pipeline_modules("train") and "train" not in imported_pipeline_modules("check")
    assert {"engine/cells", "engine/store", "engine/dispatch"} <= imported_pipeline_modules("train")
    assert covers(["pipeline/models"], "models/baselines") and not covers(["pipeline/models/seeds.py"], "models/baselines")


CELL_STAGES = ("train", "evaluate")


@pytest.mark.parametrize("name", sorted(set(stages()) - set(CELL_STAGES)))
def test_a_stage_depends_on_the_code_it_runs(name):
    stage = stages()[name]
    module = stage["cmd"].split()[2].removeprefix("pipeline.")
    needed = imported_pipeline_modules(module)
    missing = sorted(m for m in needed - {"__init__"} if not covers(stage["deps"], m)
                     and m.split("/")[-1] not in BOOKKEEPING)
    assert not missing, f"dvc.yaml stage {name!r} runs pipeline.{module} but does not depend on {missing}"


@pytest.mark.parametrize("name", CELL_STAGES)
def test_a_familys_stages_depend_on_its_specs_and_the_data_they_read_only(name):
    stage = stages()[name]
    specs = "data/specs/${item.dataset}/${item.method}"
    data = "reports/data/${item.dataset}.json" if name == "train" else "reports/eval/${item.dataset}/${item.method}"
    assert stage["deps"] == [specs, data] and "params" not in stage
    assert stage["matrix"] == {"dataset": "${datasets}", "method": "${methods}"}  # a study is no stage of its own


def params_keys_read_by_dvc() -> list[str]:
    """Every params key a stage of dvc.yaml lists, with its matrix items filled in by one of the
    shipped selection's values (the dataset cora; a method of the stage's own study)."""
    example = {"train": "cadnet"}
    keys = []
    for name, stage in stages().items():
        for key in stage.get("params", []):
            key = key.replace("${item.dataset}", "cora").replace("${item.method}", example.get(name, "cadnet"))
            if key not in keys:
                keys.append(key)
    return keys


@pytest.mark.parametrize("key", params_keys_read_by_dvc())
def test_a_key_dvc_reads_is_required_by_the_check_stage(workdir, key):
    """DVC fails on a params key a stage lists only after deleting that stage's outputs; the
    check stage, which every stage depends on, refuses its absence first, naming it."""
    import copy

    from conftest import SHIPPED_PARAMS, write_params
    from pipeline import check
    from pipeline.config import ConfigError

    params = copy.deepcopy(SHIPPED_PARAMS)
    *parents, last = key.split(".")
    holder = params
    for part in parents:
        holder = holder[part]
    del holder[last]
    write_params(workdir, params)
    with pytest.raises(ConfigError) as info:
        check.main([])
    assert str(info.value).startswith(f"{key}:") and "missing" in str(info.value), str(info.value)
    assert not (workdir / "data").exists()
