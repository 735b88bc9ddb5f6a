"""pipeline/models/baselines.py: the Table 2 baselines, each seed-batched form against its one-seed
reference, and the protocol they share with CAD-Net."""
from __future__ import annotations

import shutil

import copy

import pytest
import torch
from torch.func import vmap

from conftest import SHIPPED_PARAMS, read_params, train_cell, update_params, vmapped, write_params
from pipeline import config
from pipeline.engine import loop
from pipeline.models import baselines
from pipeline.files import save_torch
from pipeline.models import BASELINES, REGISTRY
from test_adacad_batched import synthetic_graph

BATCHED = [m for m in BASELINES if REGISTRY[m].batched]
SETTINGS = dict(hidden=6, p_drop=0.5, K=2, ppr_alpha=0.1, heads=2, output_heads=1, layers=2, depth=2,
                edge_drop=0.2, diffusion_topk=8, lr=0.01, weight_decay=5e-4, epochs=4, early_stop_window=0,
                lr_drop_every=0, lr_drop_factor=0.5, split="per_class", train_per_class=5, val_per_class=5,
                input_drop=0.5, hidden_per_power=[3, 2, 2], output_per_power=[0, 3, 3], kernel_l2=5e-3,
                kernel_lasso=5e-3, optimizer="adam", lr_decrement_every=1, lr_decrement=0.0)


def settings(name: str, **changes) -> dict:
    return dict(SETTINGS, baseline=name, **changes)


def test_the_registry_holds_the_eleven_baselines_of_table_2():
    assert len(BASELINES) == 11 and all(REGISTRY[m].paper == ("table2", m) for m in BASELINES)
    assert {m for m in BASELINES if not REGISTRY[m].batched} == {"agnn", "graph_unet"}


@pytest.mark.parametrize("name", BATCHED)
def test_seeds_side_by_side_equal_each_seed_alone_forward_and_gradients(name):
    """Dropout off (eval): seed s of the stacked network computes what its one-seed network
    computes, and its gradient is that network's gradient."""
    assert_stacked_equals_alone(name)


@pytest.mark.parametrize("dense_above", [0.0, 1.0], ids=["dense input product", "sparse input product"])
def test_mixhop_side_by_side_equals_each_seed_alone_with_either_input_product(monkeypatch, dense_above):
    monkeypatch.setattr(baselines.MixHop, "DENSE_INPUT_ABOVE", dense_above)
    assert_stacked_equals_alone("mixhop")


def assert_stacked_equals_alone(name: str) -> None:
    graph, hp = synthetic_graph(), settings(name)
    stacked = baselines.build_baseline(graph, hp, [3, 4], batched=True).eval()
    out = stacked()
    y = graph["y"]
    loss = -out.log_probs.gather(-1, y.view(-1, 1, 1).expand(-1, 2, 1)).sum()
    loss.backward()
    for s, seed in enumerate((3, 4)):
        alone = baselines.build_baseline(graph, hp, [seed], batched=False).eval()
        single = alone()
        torch.testing.assert_close(out.log_probs[:, s], single.log_probs[:, 0], rtol=1e-5, atol=1e-5)
        (-single.log_probs[:, 0].gather(-1, y.view(-1, 1)).sum()).backward()
        grads = [p.grad for p in alone.parameters() if p.requires_grad]
        stacked_grads = [p.grad[s] for p in stacked.parameters()]
        assert len(grads) == len(stacked_grads) > 0
        for got, want in zip(stacked_grads, grads):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(out.regularizer[s], single.regularizer[0])
    assert torch.equal(out.gamma, torch.ones(graph["y"].size(0), 2))
    if name != "mixhop":  # the one baseline with loss terms of its own
        assert torch.equal(out.regularizer, torch.zeros(2))


@pytest.mark.parametrize("name", BATCHED)
def test_training_mode_draws_different_dropout_per_seed(name):
    graph, hp = synthetic_graph(), settings(name, p_drop=0.5)
    if name == "sgc":
        pytest.skip("SGC has no dropout")
    torch.manual_seed(0)
    # two seeds with the same initial weights: only their dropout masks can differ
    net = baselines.SeedsSideBySide([baselines.make_network(name, graph["x"].size(1), graph["num_classes"], hp,
                                                            graph["y"].size(0))
                                     for _ in range(1)] * 2, baselines.baseline_inputs(graph, name, hp)).train()
    out = net().log_probs
    assert not torch.allclose(out[:, 0], out[:, 1])


def test_inputs_are_dense_features_and_the_graph_without_added_self_loops():
    graph = synthetic_graph()
    loops = torch.arange(5).repeat(2, 1)
    graph["edge_index"] = torch.cat([graph["edge_index"], loops], dim=1)
    x, edge_index, weight = baselines.baseline_inputs(graph, "gcn", settings("gcn"))
    assert x.layout == torch.strided and torch.equal(x, graph["x"].to_dense())
    assert not (edge_index[0] == edge_index[1]).any() and weight is None


def test_gdc_rewires_the_graph_column_stochastic_and_top_k():
    graph = synthetic_graph()
    x, edge_index, weight = baselines.baseline_inputs(graph, "gdc", settings("gdc", diffusion_topk=3))
    n = graph["y"].size(0)
    columns = torch.zeros(n).index_add_(0, edge_index[1], weight)
    assert torch.allclose(columns, torch.ones(n), atol=1e-5)  # normalization_out="col"
    assert torch.bincount(edge_index[1], minlength=n).max() <= 3  # top-3 per column


def test_a_baseline_reads_only_the_protocol_from_cadnets_table(workdir):
    update_params(workdir, beta=0.9, K=7, lr=0.5)
    hp = config.hparams_for(config.load_params(), "cora", "gcn")
    assert "beta" not in hp and "K" not in hp and hp["lr"] == 0.01  # its own lr, not the override
    assert hp["split"] == "public" and hp["lr_drop_every"] == 0


@pytest.mark.parametrize("name", ["agnn", "graph_unet"])
def test_unbatchable_baselines_train_seed_by_seed_in_the_same_loop(name):
    records = loop.train_chunk(synthetic_graph(), settings(name), [0, 1], method=name, batched=False)
    assert [r["seed"] for r in records] == [0, 1] and all(r["engine"] == "single" for r in records)
    assert all(0 <= r["test_acc"] <= 1 for r in records)


def test_graph_unets_sparse_features_give_its_dense_network_and_drop_stored_entries_only(monkeypatch):
    """Its sparse implementation computes the dense one's network (eval mode; the same seed's
    weights), trains seed by seed, and drops X's stored entries only, at the network's rate."""
    graph = synthetic_graph()
    dense, sparse = settings("graph_unet"), settings("graph_unet", implementation="sparse")
    nets = [baselines.build_baseline(graph, hp, [3], batched=False).eval() for hp in (dense, sparse)]
    assert nets[1].inputs[0].is_sparse and not nets[0].inputs[0].is_sparse
    torch.testing.assert_close(nets[1]().log_probs, nets[0]().log_probs, rtol=1e-5, atol=1e-6)
    assert not REGISTRY["graph_unet"].batched_for(sparse)
    seen = []
    monkeypatch.setattr(baselines, "sparse_dropout", lambda x, p, training: seen.append((x._nnz(), p, training)) or x)
    nets[1].train()()
    assert seen == [(graph["x"].coalesce()._nnz(), sparse["p_drop"], True)]


def test_graph_unets_pooled_graphs_on_the_kept_nodes_are_pygs_bit_for_bit():
    """PyG's GraphUNet squares A + I over all nodes, then keeps the pooled nodes' rows and
    columns; ours multiplies the kept rows by the kept columns only. The same weights and input
    give the same outputs and gradients, bit for bit (the edges' order included, which the
    sums follow), over three poolings keeping 30% of 300 nodes, then half."""
    from torch_geometric.nn import GraphUNet

    g = torch.Generator().manual_seed(0)
    pairs = torch.randint(0, 300, (2, 3000), generator=g)
    edge_index = torch.unique(torch.cat([pairs, pairs.flip(0)], dim=1), dim=1)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    x = torch.rand(300, 12, generator=g)
    outs, grads = [], []
    for network in (GraphUNet, baselines.KeptNodesGraphUNet):
        torch.manual_seed(0)
        net = network(12, 8, 3, depth=3, pool_ratios=[0.3, 0.5])
        out = net(x, edge_index)
        out.square().sum().backward()
        outs.append(out)
        grads.append([p.grad for p in net.parameters()])
    assert torch.equal(outs[0], outs[1])
    assert len(grads[0]) == len(grads[1]) and all(torch.equal(a, b) for a, b in zip(*grads))


def test_graph_unets_square_lists_each_row_in_torchs_order_with_torchs_sums():
    """Row 0 reaches column 2 first (through k = 0), then column 0 (through k = 1): torch's CSR
    product on the CPU lists them in that order, not sorted, and the GCN layers after a pooling
    sum in the edges' order; ours (SciPy's product, which does not keep its memory as torch's
    does) must list and sum them the same way. On a random graph too, bit for bit."""
    from torch_geometric.utils import to_torch_csr_tensor

    def csr(entries, values, n=3):
        return to_torch_csr_tensor(torch.tensor(entries).t(), torch.tensor(values), size=(n, n))
    a = csr([[0, 0], [0, 1], [1, 2]], [2.0, 3.0, 1.0])
    b = csr([[0, 2], [1, 0], [1, 2], [2, 1]], [5.0, 7.0, 11.0, 13.0])
    index, values = baselines.csr_product(a, b)
    assert index.tolist() == [[0, 0, 1], [2, 0, 1]] and values.tolist() == [2 * 5 + 3 * 11, 3 * 7, 13]
    g = torch.Generator().manual_seed(0)
    pairs = torch.randint(0, 400, (2, 4000), generator=g)
    a = to_torch_csr_tensor(pairs, torch.rand(4000, generator=g), size=(400, 400))
    torchs = (a @ a).to_sparse_coo()
    index, values = baselines.csr_product(a, a)
    assert torch.equal(index, torchs.indices()) and torch.equal(values, torchs.values())


def test_a_resumed_baseline_retrains_its_whole_block_and_repeats_it(workdir):
    """A vmapped baseline's dropout comes from its chunk's stream: the chunk size is part of the
    fingerprint and a lost seed is retrained with its whole block, identically."""
    update_params(workdir, datasets=["cora"], methods=["gcn"], runs=4, seed_chunk=2,
                  variants={"datasets": [], "methods": [], "runs": {}}, baselines={"datasets": [], "methods": [], "runs": {}})
    write_params(workdir, vmapped(read_params(workdir), "gcn"))
    (workdir / "data/processed/cora").mkdir(parents=True)
    save_torch(synthetic_graph(), workdir / "data/processed/cora/graph.pt")
    train_cell(["cora", "gcn"])
    run_dir = workdir / "data/runs/cora/gcn/main"
    first = torch.load(run_dir / "seed_003.pt", weights_only=False)
    assert first["engine"] == "batched (chunk of 2)"
    (run_dir / "seed_003.pt").unlink()
    shutil.rmtree(workdir / "reports/eval/cora/gcn")  # as if stopped before its tables: judged by its seeds
    mtime = (run_dir / "seed_002.pt").stat().st_mtime_ns
    train_cell(["cora", "gcn"])
    again = torch.load(run_dir / "seed_003.pt", weights_only=False)
    assert again["history"] == first["history"] and again["fingerprint"] == first["fingerprint"]
    assert (run_dir / "seed_002.pt").stat().st_mtime_ns == mtime  # trained again, not rewritten


# MixHop as its authors' code builds it, against the formulas written out on a 3-node path 0-1-2
PATH = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
# D^-1/2 (A + I) D^-1/2 by hand: degrees with the self-loop 2, 3, 2
A_HAT = torch.tensor([[1 / 2, 1 / 6 ** 0.5, 0], [1 / 6 ** 0.5, 1 / 3, 1 / 6 ** 0.5], [0, 1 / 6 ** 0.5, 1 / 2]])


def path_graph(x: torch.Tensor) -> dict:
    return {"x": x.to_sparse(), "edge_index": PATH, "y": torch.tensor([0, 1, 0]), "num_classes": 2}


def test_mixhop_takes_which_words_occur_and_the_hand_normalised_graph():
    tf_idf = torch.tensor([[0.3, 0.0, 0.7], [0.0, 2.0, 0.0], [0.1, 0.2, 0.0]])
    words, adjacency, transposed = baselines.baseline_inputs(path_graph(tf_idf), "mixhop", settings("mixhop"))
    assert torch.equal(torch.stack([words.rows, words.cols]), (tf_idf != 0).nonzero().t())
    torch.testing.assert_close(adjacency.to_dense(), A_HAT)
    torch.testing.assert_close(transposed.to_dense(), A_HAT.t())
    assert adjacency.crow_indices().dtype == transposed.col_indices().dtype == torch.int32


def test_mixhop_layer_concatenates_each_power_of_the_graph_times_its_own_weights():
    layer = baselines.MixHopLayer(2, [1, 2, 1])
    h = torch.tensor([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])
    w0, w1, w2 = (lin.weight.t() for lin in layer.lins)
    want = torch.cat([h @ w0, A_HAT @ h @ w1, A_HAT @ A_HAT @ h @ w2], dim=1)
    torch.testing.assert_close(layer(h, A_HAT.to_sparse_csr(), A_HAT.t().to_sparse_csr()), want)
    # a power of width 0 is left out
    assert baselines.MixHopLayer(2, [0, 1, 1]).powers == [1, 2]


def test_mixhop_input_dropout_keeps_rows_unit_length_on_the_words_that_occur():
    x = torch.tensor([[1.0, 0, 1, 1, 0, 1], [0, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    entries = x.nonzero().t()

    def dropped_normalised(training):
        values = baselines.dropped_normalised(entries[0], 3, 0.5, training)
        return torch.zeros(3, 6).index_put(tuple(entries), values)

    torch.testing.assert_close(dropped_normalised(False), x / x.norm(dim=1, keepdim=True))
    torch.manual_seed(0)
    dropped = dropped_normalised(True)
    assert not dropped[x == 0].any()
    for row in dropped:  # the kept words share the row's unit length equally
        kept = row[row != 0]
        if kept.numel():
            torch.testing.assert_close(kept, torch.full_like(kept, kept.numel() ** -0.5))
    assert (dropped[x == 1] == 0).any()  # and some were dropped


@pytest.mark.parametrize("dense_above", [0.0, 1.0], ids=["dense input product", "sparse input product"])
def test_mixhop_forward_is_the_authors_network_written_out(monkeypatch, dense_above):
    """Eval mode: L2-normalised binary features, a MixHop layer, batch norm with the batch's
    own statistics (TF's training-mode batch_norm, centre only, eps 1e-3), ReLU, the output
    MixHop layer, and its class-sized segments summed with softmax(q); the input's product the
    same dense or sparse."""
    monkeypatch.setattr(baselines.MixHop, "DENSE_INPUT_ABOVE", dense_above)
    x = torch.tensor([[1.0, 0, 1], [0, 1, 0], [1, 1, 0]])
    hp = settings("mixhop", hidden_per_power=[1, 2, 1], output_per_power=[2, 0, 2])
    torch.manual_seed(0)
    net = baselines.make_network("mixhop", 3, 2, hp, 3).eval()
    with torch.no_grad():
        net.centre.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
        net.q.copy_(torch.tensor([0.5, -1.0]))
    got = net(*baselines.baseline_inputs(path_graph(x), "mixhop", hp))

    def mixhop(h, layer, powers):
        return torch.cat([torch.linalg.matrix_power(A_HAT, p) @ h @ lin.weight.t()
                          for p, lin in zip(powers, layer.lins)], dim=1)
    h = mixhop(x / x.norm(dim=1, keepdim=True), net.hidden, [0, 1, 2])
    h = (h - h.mean(0)) / (h.var(0, unbiased=False) + 1e-3).sqrt() + net.centre
    out = mixhop(torch.relu(h), net.output, [0, 2])  # power 1 has width 0
    q = torch.softmax(torch.tensor([0.5, -1.0]), 0)
    torch.testing.assert_close(got, q[0] * out[:, :2] + q[1] * out[:, 2:])


def test_mixhop_penalty_is_l2_plus_per_unit_lasso_on_kernels_and_the_q_term():
    net = baselines.make_network("mixhop", 2, 2, settings("mixhop", hidden_per_power=[1, 0, 0],
                                                          output_per_power=[2, 0, 0], kernel_l2=0.1,
                                                          kernel_lasso=0.01), 3)
    with torch.no_grad():
        net.hidden.lins[0].weight.copy_(torch.tensor([[3.0, 4.0]]))  # one unit: norm 5
        net.output.lins[0].weight.copy_(torch.tensor([[1.0], [0.0]]))  # two units: norms 1 and 0
        net.q.copy_(torch.tensor([2.0]))
        net.centre.copy_(torch.tensor([100.0]))  # not a kernel: no penalty
    want = 0.1 * (25 + 1) + 0.01 * (5 + 1 + 0) + 1e-3 * 4
    torch.testing.assert_close(net.penalty(dict(net.named_parameters())), torch.tensor(want))


def test_mixhop_l2_as_shipped_puts_no_lasso_on_its_kernels():
    """The entry's resolved settings reach the network: its penalty is L2 and the q term alone."""
    hp = config.hparams_for(copy.deepcopy(SHIPPED_PARAMS), "citeseer", "mixhop_l2")
    net = baselines.make_network("mixhop", 5, 6, hp, 3)
    params = dict(net.named_parameters())
    kernels = [lin.weight for layer in (net.hidden, net.output) for lin in layer.lins]
    want = hp["kernel_l2"] * sum(w.pow(2).sum() for w in kernels) + 1e-3 * net.q.pow(2).mean()
    torch.testing.assert_close(net.penalty(params), want)
    assert hp["kernel_l2"] > 0


def test_mixhop_output_widths_must_make_whole_class_segments():
    with pytest.raises(config.ConfigError, match="method_hparams.mixhop.output_per_power"):
        baselines.make_network("mixhop", 3, 2, settings("mixhop", output_per_power=[1, 1, 1]), 3)


def test_shared_sparse_product_under_vmap_is_each_seeds_product_and_gradient():
    """The seeds side by side as columns: seed s gets A @ H_s and the gradient A^T G_s, on a
    directed A (so that the transpose matters)."""
    A = torch.tensor([[0.0, 2.0, 0.0], [0.5, 0.0, 0.0], [1.0, 3.0, -1.0]])
    H = torch.randn(4, 3, 2, requires_grad=True)  # 4 seeds, 3 nodes, 2 features
    G = torch.randn(4, 3, 2)
    product = vmap(lambda h: baselines.SharedSparseProduct.apply(A.to_sparse_csr(), A.t().to_sparse_csr(), h))
    out = product(H)
    (out * G).sum().backward()
    torch.testing.assert_close(out, A @ H.detach())
    torch.testing.assert_close(H.grad, A.t() @ G)


def test_sparse_rows_times_weight_under_vmap_is_each_seeds_product_and_weight_gradient():
    """Per-seed values on one pattern (a non-square X, so rows and columns cannot be swapped
    unnoticed): seed s gets X_s @ W_s and the gradient X_s^T G_s, batched and alone."""
    entries = torch.tensor([[0, 0, 1, 2, 2], [1, 3, 0, 1, 2]])
    pattern = baselines.SparsePattern(entries, (3, 4))
    values = torch.randn(2, 5)
    dense = torch.zeros(2, 3, 4).index_put((torch.arange(2).view(-1, 1), *entries), values)
    W = torch.randn(2, 4, 3, requires_grad=True)
    G = torch.randn(2, 3, 3)
    out = vmap(lambda v, w: baselines.SparseRowsTimesWeight.apply(pattern, v, w))(values, W)
    (out * G).sum().backward()
    torch.testing.assert_close(out, dense @ W.detach())
    torch.testing.assert_close(W.grad, dense.transpose(1, 2) @ G)
    alone = W[1].detach().requires_grad_()
    out = baselines.SparseRowsTimesWeight.apply(pattern, values[1], alone)
    (out * G[1]).sum().backward()
    torch.testing.assert_close(out, dense[1] @ W[1].detach())
    torch.testing.assert_close(alone.grad, dense[1].t() @ G[1])
    with pytest.raises(NotImplementedError, match="no gradient for the sparse values"):
        baselines.SparseRowsTimesWeight.apply(pattern, values[0].requires_grad_(), W[0])


def test_sparse_pattern_builds_each_block_layout_once_with_int32_indices():
    """The block-diagonal indices depend on the chunk size and the side only: built once and
    reused by every product of the chunk, a fresh layout for another size or the transpose."""
    pattern = baselines.SparsePattern(torch.tensor([[0, 0, 1, 2, 2], [1, 3, 0, 1, 2]]), (3, 4))
    first, again = (pattern.block_diagonal(torch.randn(2, 5)) for _ in range(2))
    assert first.col_indices().data_ptr() == again.col_indices().data_ptr()
    assert first.crow_indices().dtype == first.col_indices().dtype == torch.int32
    transposed = pattern.block_diagonal(torch.randn(2, 5), transposed=True)
    assert transposed.shape == (8, 6) and transposed.col_indices().data_ptr() != first.col_indices().data_ptr()
    assert pattern.block_diagonal(torch.randn(3, 5)).shape == (9, 12)


def test_csr_indices_become_int32_only_when_every_value_fits():
    small, big = torch.tensor([0, 5]), torch.tensor([0, 2**31])
    assert [i.dtype for i in baselines.compact_indices(small, small)] == [torch.int32] * 2
    assert [i.dtype for i in baselines.compact_indices(small, big)] == [torch.int64] * 2
