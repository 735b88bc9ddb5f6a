"""Preparing a cell (pipeline/engine/cells.py): its chunk size, from its own cap, the global one
and the memory budget."""
from __future__ import annotations

import pytest

from pipeline import config
from pipeline.engine import cells, memory, spec
from test_adacad_batched import N, hparams, synthetic_graph


def test_chunk_size_of_a_cell_with_zero_runs_is_one():
    assert cells.chunk_size(synthetic_graph(), hparams(), {"seed_chunk": 25, "memory_budget_gb": 6}, 0) == 1


def test_a_cells_own_seed_chunk_caps_its_chunk_in_place_of_the_global_one():
    params = {"seed_chunk": 25, "memory_budget_gb": 6}
    assert cells.chunk_size(synthetic_graph(), hparams(), params, 100) == 25
    assert cells.chunk_size(synthetic_graph(), hparams(seed_chunk=5), params, 100) == 5
    assert cells.chunk_size(synthetic_graph(), hparams(seed_chunk=40), params, 100) == 34  # 3 even chunks


def test_the_chunk_shrinks_to_what_gdcs_messages_leave_room_for():
    """A budget of exactly two GDC seeds on the complete rewired graph: eight runs go in four
    chunks of two, where the proxy alone would have put all eight in one."""
    graph = synthetic_graph()
    gdc = hparams(baseline="gdc", hidden=64, diffusion_topk=N)
    budget = memory.peak_bytes(graph, gdc, 2)
    assert memory.estimate_peak_bytes(**memory.graph_sizes(graph, gdc), seeds=8) <= budget
    params = {"seed_chunk": 25, "memory_budget_gb": budget / 2**30}
    assert cells.chunk_size(graph, gdc, params, 8) == 2
    with pytest.raises(config.ConfigError, match="memory_budget_gb"):
        cells.check_memory(graph, gdc, {"memory_budget_gb": memory.peak_bytes(graph, gdc, 1) / 2**30 * 0.99}, "cora/gdc")


def test_a_cell_names_the_identities_of_the_other_studies_cells_of_its_network():
    """PubMed's GAT at range 2 is Table 2's GAT with its two layers written out (another seed
    identity, the same network): it names that cell's identity, so that its seeds are copied,
    not trained again. Range 4 names none; Cora's Cheby at range 2 names Table 2's (K 3);
    CiteSeer's (K 2 in Table 2) does not."""
    params = config.load_params()
    gat_2, gat_4 = (config.Cell("ranges", "pubmed", "gat", (("range", r),)) for r in (2, 4))
    table2 = spec.seed_identity(spec.cell_spec(params, config.Cell("baselines", "pubmed", "gat")))
    assert table2 != spec.seed_identity(spec.cell_spec(params, gat_2))
    twins = spec.family_twins(params, "pubmed", "gat")
    assert cells.twin_identities(params, twins[gat_2], 1) == {table2}
    assert cells.twin_identities(params, twins[gat_4], 1) == set()
    for dataset, twinned in (("cora", True), ("citeseer", False)):
        cheb_2 = config.Cell("ranges", dataset, "cheb", (("range", 2),))
        cheb_table2 = spec.seed_identity(spec.cell_spec(params, config.Cell("baselines", dataset, "cheb")), 1)
        twins = spec.family_twins(params, dataset, "cheb")
        assert (cheb_table2 in cells.twin_identities(params, twins[cheb_2], 1)) == twinned
