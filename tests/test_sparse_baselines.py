"""pipeline/models/sparse_baselines.py: the baselines as sparse products, against their
one-seed PyG networks, on a tiny graph whose propagation can be checked by hand, and seed by seed
independent of the chunk."""
from __future__ import annotations

import pytest
import torch

from pipeline.engine import loop
from pipeline.models import REGISTRY, baselines
from pipeline.models.methods import SPARSE_VERSIONS
from pipeline.models.sparse_baselines import FixedGraph
from test_adacad_batched import synthetic_graph
from test_baselines import settings

SPARSE = ["gcn", "sgc", "appnp", "gdc", "cheb", "sage", "jknet", "gat", "agnn"]
# each sparse network with its settings; SGC in both orders of its products; the layered
# networks with a hidden layer more (the ranges study); GAT with several output heads (PubMed)
CASES = [pytest.param(name, {}, id=name) for name in SPARSE] + [
    pytest.param("sgc", {"product_order": "weights_first"}, id="sgc, weights first"),
    pytest.param("cheb", {"K": 4}, id="cheb, K 4"),
    pytest.param("cheb", {"K": 1}, id="cheb, K 1"),
    pytest.param("sage", {"layers": 3}, id="sage, 3 layers"),
    pytest.param("jknet", {"layers": 3}, id="jknet, 3 layers"),
    pytest.param("gat", {"layers": 3, "output_heads": 3}, id="gat, 3 layers, 3 output heads"),
    pytest.param("agnn", {"prop_layers": 3}, id="agnn, 3 propagation layers")]


# the networks whose seeds train the same in any chunk to float rounding, not to the bit. SGC: 3
# classes a seed, the product's width S x 3 changes its kernel's column blocking. GAT: ELU and
# the attention's exp are vectorised with a scalar loop for each thread's last elements, and
# where a seed's values fall in that loop depends on the number of seeds beside it
TO_ROUNDING = ("sgc", "gat")


def _first(t, s):  # [F, S, H] -> seed s's weight as PyG's Linear holds it, [H, F]
    return t[:, s].t()


def _stacked(t, s):  # [S, H, C] -> [C, H]
    return t[s].t()


def _vector(t, s):
    return t[s]


def _attention(t, s):  # [S, H, C] -> GATConv's [1, H, C]; AGNN's [S] -> [1]
    return t[s:s + 1]


def _first_k(k):  # ChebNet's [F, S, K, H] -> seed s's k-th weight, [H, F]
    return lambda t, s: t[:, s, k].t()


def _stacked_k(k):  # [S, K, D, O] -> [O, D]
    return lambda t, s: t[s, k].t()


def seed_views(name: str, hp: dict) -> dict:
    """Each parameter of the one-seed network: the stacked parameter that holds it and seed s's
    slice of that one."""
    layers = hp.get("layers", 2)
    if name in ("gcn", "gdc", "jknet"):
        views = {"convs.0.lin.weight": ("w_in", _first), "convs.0.bias": ("biases.0", _vector)}
        for k in range(1, layers):
            views |= {f"convs.{k}.lin.weight": (f"weights.{k - 1}", _stacked), f"convs.{k}.bias": (f"biases.{k}", _vector)}
        if name == "jknet":
            views |= {"lin.weight": ("w_out", _stacked), "lin.bias": ("b_out", _vector)}
        return views
    if name == "cheb":
        views = {"convs.0.bias": ("biases.0", _vector), "convs.1.bias": ("biases.1", _vector)}
        for k in range(hp["K"]):
            views |= {f"convs.0.lins.{k}.weight": ("w_in", _first_k(k)),
                      f"convs.1.lins.{k}.weight": ("weights.0", _stacked_k(k))}
        return views
    if name == "sage":
        views = {"convs.0.lin_l.weight": ("w_in", _first), "convs.0.lin_r.weight": ("w_root", _first),
                 "convs.0.lin_l.bias": ("biases.0", _vector)}
        for k in range(1, layers):
            views |= {f"convs.{k}.lin_l.weight": (f"neighbours.{k - 1}", _stacked),
                      f"convs.{k}.lin_r.weight": (f"roots.{k - 1}", _stacked),
                      f"convs.{k}.lin_l.bias": (f"biases.{k}", _vector)}
        return views
    if name == "gat":
        views = {"convs.0.lin.weight": ("w_in", _first)}
        for k in range(layers):
            views |= {f"convs.{k}.att_src": (f"att_src.{k}", _attention), f"convs.{k}.att_dst": (f"att_dst.{k}", _attention),
                      f"convs.{k}.bias": (f"biases.{k}", _vector)}
            if k:
                views[f"convs.{k}.lin.weight"] = (f"weights.{k - 1}", _stacked)
        return views
    if name == "agnn":  # the first propagation layer's beta is a buffer (fixed), the others learned
        learned = {f"props.{k}.beta": (f"beta_{k}", _attention) for k in range(1, hp.get("prop_layers", 2))}
        return {"lin1.weight": ("w_in", _first), "lin1.bias": ("b_in", _vector), "lin2.weight": ("w_out", _stacked),
                "lin2.bias": ("b_out", _vector), **learned}
    return {"appnp": {"lin1.weight": ("w_in", _first), "lin1.bias": ("b_in", _vector),
                      "lin2.weight": ("w_out", _stacked), "lin2.bias": ("b_out", _vector)},
            "sgc": {"conv.lin.weight": ("w_in", _first), "conv.lin.bias": ("bias", _vector)}}[name]


def test_every_network_with_a_sparse_implementation_is_tested_here():
    assert {m for m in REGISTRY if callable(REGISTRY[m].chunk_independent)} == set(SPARSE)


@pytest.mark.parametrize("name, extra", CASES)
def test_sparse_seeds_equal_each_seed_alone_forward_and_gradients(name, extra):
    """Dropout off (eval): seed s computes what PyG's one-seed network computes from the same
    initial weights, and its gradient is that network's."""
    graph, hp = synthetic_graph(), settings(name, implementation="sparse", **extra)
    stacked = baselines.build_baseline(graph, hp, [3, 4], batched=True).eval()
    assert type(stacked).__module__ == "pipeline.models.sparse_baselines"
    out, y = stacked(), graph["y"]
    (-out.log_probs.gather(-1, y.view(-1, 1, 1).expand(-1, 2, 1)).sum()).backward()
    for s, seed in enumerate((3, 4)):
        alone = baselines.build_baseline(graph, hp, [seed], batched=False).eval()
        single = alone()
        torch.testing.assert_close(out.log_probs[:, s], single.log_probs[:, 0], rtol=1e-5, atol=1e-5)
        (-single.log_probs[:, 0].gather(-1, y.view(-1, 1)).sum()).backward()
        theirs = dict(alone.model.named_parameters())
        ours = dict(stacked.named_parameters())
        views = seed_views(name, hp)
        assert set(theirs) == set(views) and set(ours) == {key for key, _ in views.values()}
        for their_key, (key, view) in views.items():
            torch.testing.assert_close(view(ours[key].detach(), s), theirs[their_key].detach(), rtol=0, atol=0)
            torch.testing.assert_close(view(ours[key].grad, s), theirs[their_key].grad, rtol=1e-4, atol=1e-5)
    assert torch.equal(out.regularizer, torch.zeros(2)) and torch.equal(out.gamma, torch.ones(y.size(0), 2))


def test_propagation_sends_each_source_along_its_edge_with_its_weight():
    """Edges 0 -> 1 (weight 2) and 2 -> 1 (weight 3), one seed: node 1 receives 2 x0 + 3 x2, the
    others nothing (PyG's source_to_target flow); the gradient goes back the same edges."""
    graph = FixedGraph(torch.tensor([[0, 2], [1, 1]]), torch.tensor([2.0, 3.0]), 3)
    h = torch.tensor([[1.0], [10.0], [100.0]]).view(3, 1, 1).requires_grad_()
    out = graph.propagate(h)
    assert out.view(-1).tolist() == [0.0, 302.0, 0.0]
    out.sum().backward()
    assert h.grad.view(-1).tolist() == [2.0, 0.0, 3.0]


def test_gcn_normalisation_on_a_path_by_hand():
    r"""Path 0 - 1 - 2 with self-loops: degrees 2, 3, 2, so :math:`\hat{A}_{01} = 1/\sqrt{6}`,
    :math:`\hat{A}_{11} = 1/3`, :math:`\hat{A}_{00} = 1/2`."""
    graph = FixedGraph.gcn_normalised(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), 3)
    dense = graph.matrix.to_dense()
    r6 = 1 / 6 ** 0.5
    torch.testing.assert_close(dense, torch.tensor([[0.5, r6, 0], [r6, 1 / 3, r6], [0, r6, 0.5]]))


@pytest.mark.parametrize("order", ["propagated_first", "weights_first"])
def test_sgc_reads_only_the_rows_the_loop_reads_and_gives_them_unchanged(order):
    graph, hp = synthetic_graph(), settings("sgc", implementation="sparse", product_order=order)
    net = baselines.build_baseline(graph, hp, [0, 1], batched=True).eval()
    full = net().log_probs
    every = torch.zeros(graph["y"].size(0), dtype=torch.bool)
    every[[1, 4, 7]] = True
    net.read_rows(every.clone(), every)
    part = net().log_probs
    torch.testing.assert_close(part[every], full[every], rtol=0, atol=1e-6)
    assert torch.equal(part[~every], torch.zeros_like(part[~every]))


@pytest.mark.parametrize("name, extra", CASES)
def test_a_seed_trains_the_same_in_any_chunk(name, extra):
    """Dropout on: each seed's masks come from its own stream and its bias gradient sums over
    its own nodes, so seed 1 among 3 and among 30 give the same run to the bit (SGC: to float
    rounding, below). Alone, only the
    losses the loop records may differ, in their last bit: its per-seed mean over a one-column
    ``[N, 1]`` sums in another order than over ``[N, S]`` (the gradient, a constant, does not)."""
    graph, hp = synthetic_graph(), settings(name, implementation="sparse", epochs=10, **extra)
    if "p_drop" in hp:
        hp["p_drop"] = 0.5
    three, thirty = (loop.train_chunk(graph, hp, chunk, method=name) for chunk in ([0, 1, 2], list(range(30))))
    if name in TO_ROUNDING:
        for s in (1, 2):
            for key, values in three[s]["history"].items():
                assert thirty[s]["history"][key] == pytest.approx(values, rel=1e-6, abs=0), key
    else:
        assert thirty[1]["history"] == three[1]["history"] and thirty[2]["history"] == three[2]["history"]
    alone = loop.train_chunk(graph, hp, [1], method=name)[0]
    for key, values in alone["history"].items():
        assert three[1]["history"][key] == pytest.approx(values, rel=1e-6, abs=0), key
    assert alone["selected_epoch"] == three[1]["selected_epoch"]
    assert three[0]["history"]["train_loss"] != three[1]["history"]["train_loss"]


def test_sgcs_two_orders_of_products_compute_the_same_function():
    """Weights and gradients of the same seeds, either order: equal to float rounding."""
    graph = synthetic_graph()
    nets = [baselines.build_baseline(graph, settings("sgc", implementation="sparse", product_order=o), [0, 1],
                                     batched=True).eval() for o in ("propagated_first", "weights_first")]
    outs = [net().log_probs for net in nets]
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    for net, out in zip(nets, outs):
        out[:, :, 0].sum().backward()
    torch.testing.assert_close(nets[0].w_in.grad, nets[1].w_in.grad, rtol=1e-4, atol=1e-6)
    assert nets[0].propagated is not None and nets[1].propagated is None  # weights first: nothing kept


def test_each_implementation_has_its_own_version():
    """A new sparse network retrains the cells that use it, not the vmapped cells beside them."""
    for name in SPARSE:
        entry = REGISTRY[name]
        assert entry.version_for({}) == entry.version_for({"implementation": "vmap"}) == 1
        assert entry.version_for({"implementation": "sparse"}) == SPARSE_VERSIONS[name]
    assert SPARSE_VERSIONS["sgc"] > 1  # the propagated features computed once


def test_only_the_sparse_implementation_is_independent_of_its_chunk():
    entry = REGISTRY["gcn"]
    assert entry.independent_of_chunk({"implementation": "sparse"})
    assert not entry.independent_of_chunk({}) and not entry.independent_of_chunk({"implementation": "vmap"})
    assert not REGISTRY["cheb"].independent_of_chunk({})
