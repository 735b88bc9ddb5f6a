"""pipeline/bench_plain.py: each plain version is the network the pipeline trains. Given the
one-seed PyG network's weights it computes that network's outputs (eval mode), and its
training-mode dropout draws each seed's own mask."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline import bench_plain
from pipeline.engine import loop
from pipeline.models import baselines
from pipeline.models.adacad import build_cadnet
from test_adacad_batched import hparams as cadnet_hparams, synthetic_graph
from test_baselines import settings


def _load(plain, model, name):
    """The one-seed network's weights into seed 0 of the plain version (seeds = 1)."""
    with torch.no_grad():
        if name in ("gcn", "gdc"):
            plain.w1.copy_(model.convs[0].lin.weight.t()), plain.b1.copy_(model.convs[0].bias)
            plain.w2.copy_(model.convs[1].lin.weight.t()[None]), plain.b2.copy_(model.convs[1].bias.view(1, 1, -1))
        elif name == "appnp":
            plain.w1.copy_(model.lin1.weight.t()[None]), plain.b1.copy_(model.lin1.bias.view(1, 1, -1))
            plain.w2.copy_(model.lin2.weight.t()[None]), plain.b2.copy_(model.lin2.bias.view(1, 1, -1))
        elif name == "cheb":
            first, second = model.convs
            for k in range(len(first.lins)):
                plain.w1[k].copy_(first.lins[k].weight.t()), plain.w2[k].copy_(second.lins[k].weight.t()[None])
            plain.b1.copy_(first.bias), plain.b2.copy_(second.bias.view(1, 1, -1))
        elif name == "sage":
            first, second = model.convs
            plain.wl1.copy_(first.lin_l.weight.t()), plain.wr1.copy_(first.lin_r.weight.t())
            plain.b1.copy_(first.lin_l.bias)
            plain.wl2.copy_(second.lin_l.weight.t()[None]), plain.wr2.copy_(second.lin_r.weight.t()[None])
            plain.b2.copy_(second.lin_l.bias.view(1, 1, -1))
        elif name == "jknet":
            plain.w1.copy_(model.convs[0].lin.weight.t()), plain.b1.copy_(model.convs[0].bias)
            for conv, w, b in zip(model.convs[1:], plain.ws, plain.bs):
                w.copy_(conv.lin.weight.t()[None]), b.copy_(conv.bias)
            plain.w_out.copy_(model.lin.weight.t()[None]), plain.b_out.copy_(model.lin.bias.view(1, 1, -1))
        elif name == "gat":
            first, second = model.convs
            plain.w1.copy_(first.lin.weight.t()[None]), plain.w2.copy_(second.lin.weight.t()[None])
            for k, conv in enumerate(model.convs):
                plain.att_src[k].copy_(conv.att_src), plain.att_dst[k].copy_(conv.att_dst)
            plain.b1.copy_(first.bias.view(1, 1, -1)), plain.b2.copy_(second.bias.view(1, 1, -1))
        elif name == "mixhop":
            plain.w1.copy_(model.hidden.weight()[None]), plain.w2.copy_(model.output.weight()[None])
            plain.centre.copy_(model.centre.view(1, 1, -1)), plain.q.copy_(model.q.view(1, 1, 1, -1))
        else:
            plain.w.copy_(model.conv.lin.weight.t()), plain.b.copy_(model.conv.lin.bias)


@pytest.mark.parametrize("name, extra", [("gcn", {}), ("sgc", {}), ("appnp", {}), ("gdc", {}), ("cheb", {}),
                                         ("cheb", {"K": 3}), ("sage", {}), ("jknet", {}), ("jknet", {"layers": 3}),
                                         ("gat", {}), ("gat", {"output_heads": 3}), ("mixhop", {})])
def test_a_plain_version_computes_its_pyg_network(name, extra):
    graph, hp = synthetic_graph(), settings(name, **extra)
    reference = baselines.build_baseline(graph, hp, [0], batched=False).eval()
    plain = bench_plain.plain_network(name, graph, hp, seeds=1).eval()
    _load(plain, reference.model, name)
    theirs = reference().log_probs[:, 0]
    torch.testing.assert_close(F.log_softmax(plain()[0], -1), theirs, rtol=1e-5, atol=1e-5)


def test_the_plain_cadnet_computes_the_pipelines_network_and_its_entropy_term():
    """In eval mode; the synthetic graph's out-edge softmax is not symmetric, so the push
    direction is checked too."""
    graph, hp = synthetic_graph(), cadnet_hparams()
    reference = build_cadnet(graph, hp, [0], batched=False).eval()
    plain = bench_plain.plain_network("cadnet", graph, hp, seeds=1).eval()
    with torch.no_grad():
        plain.w1.copy_(reference.model.embed1.weight.t()[None]), plain.b1.copy_(reference.model.embed1.bias.view(1, 1, -1))
        plain.w2.copy_(reference.model.embed2.weight.t()[None]), plain.b2.copy_(reference.model.embed2.bias.view(1, 1, -1))
    theirs = reference()
    torch.testing.assert_close(F.log_softmax(plain()[0], -1), theirs.log_probs[:, 0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(plain.penalty(), theirs.regularizer.sum(), rtol=1e-5, atol=1e-7)
    assert bench_plain.plain_network("cadnet_pull", graph, hp, seeds=1) is None


def test_sparse_dropout_gives_each_seed_its_own_mask_on_the_stored_entries():
    x = synthetic_graph()["x"].coalesce()
    dropped = bench_plain.sparse_dropout(x, 0.5, seeds=2).coalesce().to_dense()
    kept = dropped != 0
    assert not (kept & (x.to_dense() == 0)).any()  # only stored entries survive
    assert not torch.equal(kept[0], kept[1])
    torch.testing.assert_close(dropped[kept], 2 * x.to_dense().expand(2, -1, -1)[kept])


def test_a_method_without_a_plain_version_has_none():
    assert bench_plain.plain_network("gat", synthetic_graph(), settings("gat", layers=3), seeds=1) is None


@pytest.mark.parametrize("name", ["graph_unet", "agnn"])
def test_pygs_example_computes_the_network_the_pipeline_trains_one_seed_at_a_time(name):
    graph, hp = synthetic_graph(), settings(name)
    reference = baselines.build_baseline(graph, hp, [0], batched=False).eval()
    example = bench_plain.plain_network(name, graph, hp, seeds=1).eval()
    theirs = {k.replace("props.0", "prop1").replace("props.1", "prop2"): v for k, v in reference.model.state_dict().items()}
    example.load_state_dict(theirs)
    torch.testing.assert_close(F.log_softmax(example()[0], -1), reference().log_probs[:, 0], rtol=1e-5, atol=1e-5)
    assert bench_plain.plain_network(name, graph, hp, seeds=2) is None  # PyG's example trains one seed


@pytest.mark.parametrize("name", ["graph_unet", "agnn"])
def test_pygs_example_is_timed_on_the_trajectory_of_the_loops_first_seed(name):
    """Same weights and the same dropout draws as the loop's seed 0: the bench then times the
    same computation twice, not two trajectories whose costs drift apart."""
    graph, hp = synthetic_graph(), settings(name)
    ours = loop.build_net(graph, hp, name, [0], batched=False)
    torch.manual_seed(0)  # as the loop seeds its first seed's dropout stream
    theirs = ours().log_probs[:, 0]
    example = bench_plain.seeded_network(name, graph, hp, seeds=1, device=torch.device("cpu"))
    torch.testing.assert_close(F.log_softmax(example()[0], -1), theirs, rtol=1e-5, atol=1e-5)
