"""Preparing a cell to train: its settings, graph, chunk size and identity, each checked before
any seed file is touched; and which of a family's cells train side by side as replicas of one
batch."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from pipeline import config
from pipeline.engine import plan
from pipeline.engine.loop import settings_free_within_a_batch
from pipeline.engine.memory import peak_bytes
from pipeline.engine.spec import cell_of, cell_spec, seed_identity
from pipeline.engine.splits import split_masks
from pipeline.paths import PROCESSED_ROOT, run_dir
from pipeline.preprocess import load_features_as_read, load_graph, sparse_features


class PreparedCell(NamedTuple):
    """A cell whose settings, graph and memory were checked, ready to train."""
    spec: dict
    name: str
    hp: dict
    rule: object
    graph: dict
    size: int  # seeds per chunk
    fingerprint: str  # what its seed files record (spec.seed_identity)
    twins: frozenset[str] = frozenset()  # the identities of its twin cells (twin_identities)

    @property
    def run_dir(self) -> Path:
        """The folder of data/runs that holds the cell's seed files."""
        return run_dir(self.spec["dataset"], self.spec["method"], self.name)


def prepare_cell(params: dict, spec: dict, graphs: dict, twins: dict[config.Cell, list[config.Cell]],
                 check: bool = True) -> PreparedCell:
    """The cell's settings, graph (one load per feature rule, kept in ``graphs``) and chunk size,
    and, with ``check``, whether its split and memory allow it to train. ``twins``: its family's
    cells with their twins (:func:`~pipeline.engine.spec.family_twins`), computed once for the
    family by the stage that prepares its cells."""
    cell = cell_of(spec)
    hp = config.cell_hparams(params, cell)  # with the cell's own seed_chunk, which sizes its chunks
    rule = features_rule(params, cell.dataset, hp)
    if rule not in graphs:
        graphs[rule] = load_cell_graph(cell.dataset, rule)
    graph = graphs[rule]
    if check:
        split_masks(graph, hp, 0)
        check_memory(graph, hp, params, str(cell))
    size = chunk_size(graph, hp, params, spec["runs"]) if spec["engine"] == "batched" else 1
    # a method whose batched seeds share their chunk's dropout stream records the chunk size,
    # and trains whole fixed blocks of seeds, so that a resumed run repeats a full one
    fingerprint = seed_identity(spec, size if "chunking" in spec else None)
    return PreparedCell(spec, cell.name, hp, rule, graph, size, fingerprint,
                        twin_identities(params, twins.get(cell, []), size))


def twin_identities(params: dict, twins: list[config.Cell], size: int) -> frozenset[str]:
    """The seed identities of a cell's ``twins``, its family's cells of other studies that train
    the same network (:func:`~pipeline.engine.spec.family_twins`) but write one of its settings
    otherwise: PubMed's GAT at range 2, whose grid writes the two layers that Table 2's cell leaves
    to the default. The seed store copies their seeds rather than training them again; trained in
    a chunk of ``size``, where the chunk changes a seed's numbers."""
    identities = set()
    for other in twins:
        spec = cell_spec(params, other)
        identities.add(seed_identity(spec, size if "chunking" in spec else None))
    return frozenset(identities)


def features_rule(params: dict, dataset: str, hp: dict):
    """The rule a cell normalises its features by, where it is not the one graph.pt was written
    with (a baseline under ``baseline_protocol.<dataset>.normalize_features``); None: graph.pt's
    features as they are."""
    if "normalize_features" not in hp:
        return None
    written_with = config.hparams_for(params, dataset)["normalize_features"]
    return None if hp["normalize_features"] == written_with else hp["normalize_features"]


def load_cell_graph(dataset: str, rule=None) -> dict:
    """The graph a cell trains on: graph.pt, with the features as read normalised by ``rule``
    where :func:`features_rule` gives one."""
    graph = load_graph(dataset, root=PROCESSED_ROOT)
    if rule is not None:
        graph["x"] = sparse_features(load_features_as_read(dataset, PROCESSED_ROOT), rule)
    return graph


def chunk_cap(hp: dict, params: dict, runs: int) -> int:
    """The most of ``runs`` seeds a chunk may hold before memory counts: ``seed_chunk`` (the
    cell's ``hp``, else ``params``; ``auto``: no limit). Needs no graph: the check stage asks it."""
    cap = hp.get("seed_chunk", params.get("seed_chunk", "auto"))
    return runs if cap == "auto" else min(cap, runs)


def chunk_size(graph: dict, hp: dict, params: dict, runs: int) -> int:
    """Seeds per batched chunk: at most ``seed_chunk`` (the cell's ``hp``, else ``params``;
    ``auto``: no limit), fewer where the estimated peak memory would pass
    ``memory_budget_gb``, evened out over the chunks needed.
    CAD-Net's seeds do not depend on their chunk; a baseline's share its chunk's dropout
    stream, so its fingerprint records the size (:func:`prepare_cell`)."""
    if runs == 0:  # a cell set to 0 runs trains nothing; any size will do
        return 1
    limit = chunk_cap(hp, params, runs)
    budget = params.get("memory_budget_gb", 6) * 2**30
    fits = max([s for s in range(1, limit + 1) if peak_bytes(graph, hp, s) <= budget], default=1)
    chunks = -(-runs // fits)
    return -(-runs // chunks)


def check_memory(graph: dict, hp: dict, params: dict, where: str) -> None:
    """Refuse, before anything is trained or moved, settings whose single seed would not fit."""
    one_seed = peak_bytes(graph, hp, 1)
    budget = params.get("memory_budget_gb", 6)
    if one_seed > budget * 2**30:
        raise config.ConfigError(
            f"memory_budget_gb: {budget} GB is below the estimated peak of one seed of {where} "
            f"({one_seed / 2**30:.3g} GB with hidden={hp.get('hidden')}, K={hp.get('K')}); raise it or lower those")


def fixed_blocks(pending: list[int], size: int, runs: int) -> list[list[int]]:
    """For a method whose batched seeds share their chunk's dropout stream: the fixed blocks of
    seeds ``[k*size, (k+1)*size)`` that hold a pending seed, each trained whole, so that a
    resumed run repeats exactly what a full run does (only the pending seeds are written)."""
    return [list(range(k * size, min((k + 1) * size, runs))) for k in sorted({seed // size for seed in pending})]


def replica_groups(cells: list[PreparedCell]) -> list[list[PreparedCell]]:
    """The family's cells in batches of cells that train side by side as replicas: batched
    cells of a method whose seeds do not depend on their chunk, on the same graph, whose settings
    differ only in their split and the method's ``replica_settings``
    (:func:`pipeline.engine.loop.differing_settings`), e.g. a beta study's 21 cells, or Table 2's
    cell with its label-rate and random-split cells. Every other cell is a batch of its own."""
    groups: dict = {}
    for cell in cells:
        key = replica_key(cell.spec, cell.hp, cell.rule)
        groups.setdefault(("alone", cell.name) if key is None else key, []).append(cell)
    return list(groups.values())


def replica_key(spec: dict, hp: dict, rule) -> tuple | None:
    """What a cell (its ``spec``, settings ``hp`` and :func:`features_rule`) shares with the
    other cells of its family that batch with it as replicas (:func:`replica_groups`); None for
    a cell that trains as a batch of its own. Needs no graph: the check stage's plan asks it too."""
    free = settings_free_within_a_batch(spec["method"], hp)
    if spec["engine"] != "batched" or not free or "chunking" in spec:
        return None
    return rule, tuple(sorted((k, repr(v)) for k, v in hp.items() if k not in free))


def group_measured(params: dict, cells: list[PreparedCell], device: str) -> tuple[float, str] | None:
    """A seed's estimated cost in a replica batch of ``cells``, as the queue plans it
    (:func:`pipeline.engine.plan.cell_measured`): the dearest cell's, so that a deadline holds."""
    baselines = config.baseline_methods(params)
    figures = [plan.cell_measured(params, cell_of(cell.spec), device, baselines) for cell in cells]
    return max((f for f in figures if f is not None), default=None)
