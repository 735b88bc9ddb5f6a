"""The memory estimate (pipeline/engine/memory.py): the sizes it counts and what GDC's messages
add."""
from __future__ import annotations

from pipeline.engine import memory
from test_adacad_batched import N, hparams, synthetic_graph


def test_a_cell_on_a_diffusions_top_k_graph_counts_k_edges_a_node_not_the_graphs_as_read():
    graph = synthetic_graph()
    assert memory.graph_sizes(graph, hparams())["directed_edges"] == graph["edge_index"].size(1)
    assert memory.graph_sizes(graph, hparams("ppr", diffusion_topk=4))["directed_edges"] == N * 4
    assert memory.graph_sizes(graph, hparams("hk", diffusion_topk=4))["directed_edges"] == N * 4
    assert memory.graph_sizes(graph, hparams("hk", diffusion_topk=1000))["directed_edges"] == N * N  # k > N: all


def test_gdc_adds_its_hidden_wide_messages_over_the_rewired_edges_to_the_estimate():
    graph = synthetic_graph()
    gdc = hparams(baseline="gdc", hidden=64, diffusion_topk=4)
    proxy = memory.estimate_peak_bytes(**memory.graph_sizes(graph, gdc), seeds=3)
    assert memory.peak_bytes(graph, gdc, 3) - proxy == int(7.5 * 64 * (N * 4) * 3)
    gcn = hparams(baseline="gcn", hidden=64)  # the other baselines: the proxy alone
    assert memory.peak_bytes(graph, gcn, 3) == memory.estimate_peak_bytes(**memory.graph_sizes(graph, gcn), seeds=3)
    sparse = dict(gdc, implementation="sparse")  # one product of the rewired matrix: no messages
    assert memory.peak_bytes(graph, sparse, 3) == proxy
