"""How much memory a chunk of seeds needs: the estimate by which the train stage sizes its
chunks and refuses a cell that cannot fit ``memory_budget_gb``, and by which the check stage
refuses a budget below one seed before anything runs. Arithmetic on the graph's counts only
(no torch), so the check stage can use it from reports/data's counts.
"""
from __future__ import annotations

BYTES_PER_FLOAT = 4


def estimate_peak_bytes(nodes: int, directed_edges: int, features: int, feature_nnz: int,
                        classes: int, hidden: int, K: int, seeds: int) -> int:
    """Rough peak memory (bytes) of one training step of a chunk of ``seeds`` seeds.

    Counted, float32 values and int64 indices:
    - the stacked parameters with their gradient and three Adam(amsgrad) states;
    - ``adacad_batched.StackedSparseFeatures``: per stored feature and seed, two indices in each of the
      two layouts' orders, the dropout draw's index, the value, its draw and its dropped copy
      (48 bytes);
    - the MLP: about four ``[N, S, H]`` tensors (first-layer output, bias sum, activation and
      what autograd keeps) and a few ``[N, S, C]`` ones;
    - ``adacad_batched.BlockDiagonalGraph``: per edge and seed, row, column and order of both CSR
      layouts and the map between them (56 bytes), and about six per-edge values
      (similarity, transition, softmax temporaries, gradients);
    - the diffusion: the K steps' inputs kept for the backward pass, and the side-by-side
      copies of inputs and gradients for the sampled product.
    """
    S, f = seeds, BYTES_PER_FLOAT
    params = 5 * f * (features * hidden + hidden + hidden * classes + classes) * S
    feature_layout = 48 * feature_nnz * S
    mlp = f * nodes * S * (4 * hidden + 8 * classes)
    graph = (56 + 6 * f) * directed_edges * S
    diffusion = 3 * f * K * nodes * S * classes
    return params + feature_layout + mlp + graph + diffusion


def graph_sizes(graph: dict, hp: dict) -> dict:
    """What :func:`estimate_peak_bytes` needs. It models CAD-Net's batched network; for a
    baseline (no K, heads of width hidden) it is a proxy of the same order. A method that
    trains on a diffusion's top-k sparsified graph (PPR, HK, GDC) has at most k edges a node
    there, not the graph's as read (PubMed: 2.5M instead of 88k)."""
    return sizes_from_counts(hp, nodes=graph["y"].size(0), directed_edges=graph["edge_index"].size(1),
                             features=graph["x"].size(1), feature_nnz=graph["x"]._nnz(), classes=graph["num_classes"])


def sizes_from_counts(hp: dict, nodes: int, directed_edges: int, features: int, feature_nnz: int, classes: int) -> dict:
    """:func:`graph_sizes` from the graph's counts (the check stage has reports/data's, not the graph)."""
    edges = nodes * min(hp["diffusion_topk"], nodes) if "diffusion_topk" in hp else directed_edges
    hidden = hp.get("hidden", classes) * hp.get("heads", 1)
    return dict(nodes=nodes, directed_edges=edges, features=features, feature_nnz=feature_nnz, classes=classes,
                hidden=hidden, K=hp.get("K", 2))


# GDC's first GCN layer sends a hidden-wide message along each of its ~128 edges a node; the
# message and its gradient (about two floats a unit) dominate its memory, which the CAD-Net
# model above does not count. Measured (peak RSS over 5 epochs, 1 seed against 4 or 5, hidden
# 64): 473 bytes per edge and seed on Cora, 480 on CiteSeer; 480 / 64 = 7.5 bytes a unit. The
# other baselines have 2-20 edges a node, where the proxy held (docs/notes.md: the chunks that ran
# out of memory). The sparse implementation sends no messages (one product of the rewired matrix
# with all seeds' columns), which the CAD-Net model's edges and hidden columns cover.
GDC_MESSAGE_BYTES_PER_UNIT = 7.5


def peak_bytes(graph: dict, hp: dict, seeds: int) -> int:
    """Estimated peak memory of training ``seeds`` seeds of a cell in one chunk."""
    return peak_bytes_of(graph_sizes(graph, hp), hp, seeds)


def peak_bytes_of(sizes: dict, hp: dict, seeds: int) -> int:
    peak = estimate_peak_bytes(**sizes, seeds=seeds)
    if hp.get("baseline") == "gdc" and hp.get("implementation", "vmap") == "vmap":
        peak += int(GDC_MESSAGE_BYTES_PER_UNIT * sizes["hidden"] * sizes["directed_edges"] * seeds)
    return peak
