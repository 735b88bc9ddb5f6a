"""The maths of pipeline/models/adacad.py on graphs small enough to check by hand."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from pipeline.models.adacad import (
    AdaCAD,
    AdaCADConfig,
    CADNet,
    CADNetConfig,
    ClassAttentiveDiffusion,
    EdgeListGraph,
    adaptive_weight,
    class_attentive_transition,
    closed_form_diffusion,
    entropy,
    fixed_propagation,
    fixed_transition,
    sparse_dropout,
)

E = math.e
# Path graph 0 - 1 - 2 plus an isolated node 3, both directions of every edge.
PATH_EDGES = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
# Class distributions: nodes 0 and 1 sure of class 0, node 2 sure of class 1.
PATH_PROBS = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])


def dense_transition() -> torch.Tensor:
    """T by hand: p0.p1 = 1, p1.p2 = 0, so node 1 goes to 0 w.p. e/(e+1) and to 2 w.p. 1/(e+1)."""
    T = torch.zeros(4, 4)
    T[0, 1] = 1.0
    T[1, 0] = E / (E + 1)
    T[1, 2] = 1 / (E + 1)
    T[2, 1] = 1.0
    return T


def to_dense(values: torch.Tensor, edge_index: torch.Tensor, n: int) -> torch.Tensor:
    dense = torch.zeros(n, n)
    dense[edge_index[0], edge_index[1]] = values
    return dense


def random_graph(n: int = 7, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    pairs = torch.randint(0, n, (2, 12), generator=g)
    pairs = pairs[:, pairs[0] != pairs[1]]
    edges = torch.cat([pairs, pairs.flip(0), torch.arange(n).repeat(2, 1)], dim=1)
    return torch.unique(edges, dim=1)


def test_transition_matches_hand_computation():
    T, similarity = class_attentive_transition(PATH_PROBS, PATH_EDGES)
    assert torch.allclose(similarity, torch.tensor([1.0, 1.0, 0.0, 0.0]))
    assert torch.allclose(to_dense(T, PATH_EDGES, 4), dense_transition())


def test_each_node_out_transitions_sum_to_one():
    edges = random_graph()
    probs = torch.randn(7, 3).softmax(-1)
    T, _ = class_attentive_transition(probs, edges)
    sums = torch.zeros(7).index_add_(0, edges[0], T)
    assert torch.allclose(sums, torch.ones(7))


def test_push_is_transpose_and_pull_is_paper_one_step_by_hand():
    T = to_dense(class_attentive_transition(PATH_PROBS, PATH_EDGES)[0], PATH_EDGES, 4)
    z = torch.tensor([[1.0], [10.0], [100.0], [1000.0]])
    push = ClassAttentiveDiffusion(1, "push")(z, PATH_EDGES, T[PATH_EDGES[0], PATH_EDGES[1]])
    pull = ClassAttentiveDiffusion(1, "pull")(z, PATH_EDGES, T[PATH_EDGES[0], PATH_EDGES[1]])
    # push: z_i = sum_j T[j, i] z_j (authors' code)
    assert torch.allclose(push.squeeze(), torch.tensor([10 * E / (E + 1), 1 + 100, 10 / (E + 1), 0.0]))
    # pull: z_i = sum_j T[i, j] z_j (paper Eq. 6)
    assert torch.allclose(pull.squeeze(), torch.tensor([10.0, (E + 100) / (E + 1), 10.0, 0.0]))


@pytest.mark.parametrize("K", [1, 3])
def test_directions_equal_dense_matrix_powers(K):
    edges = random_graph(seed=K)
    probs = torch.randn(7, 3).softmax(-1)
    z = torch.randn(7, 3)
    T, _ = class_attentive_transition(probs, edges)
    dense = to_dense(T, edges, 7)
    power = torch.linalg.matrix_power(dense, K)
    push = ClassAttentiveDiffusion(K, "push")(z, edges, T)
    pull = ClassAttentiveDiffusion(K, "pull")(z, edges, T)
    assert torch.allclose(pull, power @ z, atol=1e-5)
    assert torch.allclose(push, power.T @ z, atol=1e-5)


def test_unknown_direction_is_rejected():
    with pytest.raises(ValueError, match="direction"):
        ClassAttentiveDiffusion(2, "sideways")


def test_gamma_formula_by_hand():
    _, similarity = class_attentive_transition(PATH_PROBS, PATH_EDGES)
    gamma = adaptive_weight(similarity, PATH_EDGES[0], 4, beta=0.6)
    # c = [1/1, (1 + 0)/2, 0/1, 0 (isolated: degree counts as 1)]
    c = torch.tensor([1.0, 0.5, 0.0, 0.0])
    assert torch.allclose(gamma, 0.6 + 0.4 * c)


def test_beta_one_gives_gamma_one_everywhere():
    edges = random_graph()
    _, similarity = class_attentive_transition(torch.randn(7, 4).softmax(-1), edges)
    assert torch.equal(adaptive_weight(similarity, edges[0], 7, beta=1.0), torch.ones(7))


def test_gamma_carries_no_gradient():
    logits = torch.randn(4, 2, requires_grad=True)
    _, similarity = class_attentive_transition(logits.softmax(-1), PATH_EDGES)
    assert not adaptive_weight(similarity, PATH_EDGES[0], 4, 0.5).requires_grad


def test_entropy_by_hand():
    probs = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.25, 0.75]])
    expected = torch.tensor([math.log(2), 0.0, -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))])
    assert torch.allclose(entropy(probs), expected, atol=1e-6)


def aggregate(cfg: AdaCADConfig, logits, self_term=None, edges=None, n: int = 7, operator=None):
    """The operator on one seed ([N, C] in, [N, C] out) over the reference edge-list graph."""
    edges = random_graph(seed=3) if edges is None else edges
    operator = operator or AdaCAD(cfg, logits.size(-1), 1, fixed_propagation(edges, n, cfg))
    self_term = logits if self_term is None else self_term
    z, ent, gamma = operator(logits.unsqueeze(1), self_term.unsqueeze(1), EdgeListGraph(edges, n, cfg.direction))
    return z.squeeze(1), ent.squeeze(1), gamma.squeeze(1)


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_adacad_equals_matrix_form_eq10(direction):
    edges = random_graph(seed=3)
    logits = torch.randn(7, 3)
    self_term = torch.randn(7, 3)  # e.g. dropped logits: diffused, but P comes from `logits`
    z, node_entropy, gamma = aggregate(AdaCADConfig(K=2, beta=0.7, direction=direction), logits, self_term, edges)

    probs = logits.softmax(-1)
    T, similarity = class_attentive_transition(probs, edges)
    dense = to_dense(T, edges, 7)
    Pi = torch.linalg.matrix_power(dense if direction == "pull" else dense.T, 2)
    degree = torch.bincount(edges[0], minlength=7).float()
    c = (to_dense(similarity, edges, 7)).sum(1) / degree
    Gamma = torch.diag(0.7 + 0.3 * c)
    expected = (torch.eye(7) - Gamma) @ self_term + Gamma @ Pi @ self_term
    assert torch.allclose(z, expected, atol=1e-5)
    assert torch.allclose(gamma, torch.diagonal(Gamma))
    assert torch.allclose(node_entropy, entropy(probs))


def test_seed_axis_gives_per_seed_results():
    """[N, S, C] input gives, per slice s, what one seed gives: the batched engine's basis."""
    edges = random_graph(seed=5)
    logits = torch.randn(7, 4, 3)
    operator = AdaCAD(AdaCADConfig(K=3, beta=0.8), 3, 4)
    z, ent, gamma = operator(logits, logits, EdgeListGraph(edges, 7, "push"))
    for s in range(4):
        z_s, ent_s, gamma_s = aggregate(AdaCADConfig(K=3, beta=0.8), logits[:, s], edges=edges)
        assert torch.allclose(z[:, s], z_s, atol=1e-6)
        assert torch.allclose(ent[:, s], ent_s)
        assert torch.allclose(gamma[:, s], gamma_s)


def test_rw_and_symna_transitions_by_hand():
    # path 0 - 1 - 2 and isolated 3: degrees 1, 2, 1
    rw = to_dense(fixed_transition(PATH_EDGES, 4, "rw"), PATH_EDGES, 4)
    assert torch.allclose(rw, torch.tensor([[0, 1, 0, 0], [0.5, 0, 0.5, 0], [0, 1, 0, 0], [0, 0, 0, 0.0]]))
    sym = to_dense(fixed_transition(PATH_EDGES, 4, "symna"), PATH_EDGES, 4)
    r = 1 / math.sqrt(2)
    assert torch.allclose(sym, torch.tensor([[0, r, 0, 0], [r, 0, r, 0], [0, r, 0, 0], [0, 0, 0, 0.0]]))


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_rw_variant_diffuses_k_steps_without_gamma(direction):
    z = torch.tensor([[1.0], [10.0], [100.0], [1000.0]])
    cfg = AdaCADConfig(K=2, beta=0.7, direction=direction, transition="rw", weighting="none")
    out, _, gamma = aggregate(cfg, z, edges=PATH_EDGES, n=4)
    T = torch.tensor([[0, 1, 0, 0], [0.5, 0, 0.5, 0], [0, 1, 0, 0], [0, 0, 0, 0.0]])
    step = T if direction == "pull" else T.T
    assert torch.equal(gamma, torch.ones(4))
    assert torch.allclose(out, step @ step @ z)  # pull: node 0 -> (1 + 100) / 2 = 50.5 after 2 steps
    if direction == "pull":
        assert out[0, 0].item() == pytest.approx(50.5)


def test_ppr_and_heat_closed_forms_equal_dense_formulas():
    """GDC's closed forms on a small graph, no sparsification (top-k >= N): PPR
    alpha (I - (1 - alpha) T)^-1 and heat exp(t (T - I)), T = symNA with self-loops of weight 1,
    then columns normalised to sum 1."""
    edges = random_graph(n=6, seed=2)
    without_loops = edges[:, edges[0] != edges[1]]
    A = to_dense(torch.ones(without_loops.size(1)), without_loops, 6) + torch.eye(6)
    d = A.sum(1).rsqrt()
    T = d[:, None] * A * d[None, :]
    expected = {
        "ppr": 0.1 * torch.linalg.inv(torch.eye(6) - 0.9 * T),
        "heat": torch.linalg.matrix_exp(3.0 * (T - torch.eye(6))),
    }
    for propagation, dense in expected.items():
        cfg = AdaCADConfig(K=5, beta=0.7, transition="symna", propagation=propagation, ppr_alpha=0.1,
                           heat_t=3.0, diffusion_topk=6)
        index, weight = closed_form_diffusion(edges, 6, cfg)
        ours = to_dense(weight, index, 6)
        assert torch.allclose(ours, dense / dense.sum(0, keepdim=True), atol=1e-5), propagation
        assert torch.allclose(ours.sum(0), torch.ones(6), atol=1e-5)  # push then averages


def test_topk_sparsification_keeps_k_entries_per_column():
    cfg = AdaCADConfig(K=5, beta=0.7, transition="symna", propagation="ppr", ppr_alpha=0.1, diffusion_topk=2)
    index, weight = closed_form_diffusion(random_graph(n=6, seed=2), 6, cfg)
    assert torch.equal(torch.bincount(index[1], minlength=6), torch.full((6,), 2))


def test_gat_transition_by_hand():
    edges = random_graph(seed=7)
    logits = torch.randn(7, 3)
    torch.manual_seed(0)
    operator = AdaCAD(AdaCADConfig(K=1, beta=0.7, transition="gat", weighting="none", direction="pull"), 3, 1)
    out, _, _ = aggregate(operator.cfg, logits, edges=edges, operator=operator)
    a_s, a_d = operator.att_source[0], operator.att_target[0]
    scores = F.leaky_relu((logits @ a_s)[:, None] + (logits @ a_d)[None, :], 0.2)
    adjacency = to_dense(torch.ones(edges.size(1)), edges, 7) > 0
    T = torch.where(adjacency, scores, torch.tensor(-math.inf)).softmax(1)
    assert torch.allclose(out, T @ logits, atol=1e-5)


def test_tf_transition_by_hand():
    edges = random_graph(seed=8)
    logits = torch.randn(7, 3)
    operator = AdaCAD(AdaCADConfig(K=2, beta=0.7, transition="tf", weighting="none", direction="push"), 3, 1)
    out, _, _ = aggregate(operator.cfg, logits, edges=edges, operator=operator)
    q, k = logits @ operator.query[0], logits @ operator.key[0]
    adjacency = to_dense(torch.ones(edges.size(1)), edges, 7) > 0
    T = torch.where(adjacency, q @ k.T, torch.tensor(-math.inf)).softmax(1)
    assert torch.allclose(out, T.T @ T.T @ logits, atol=1e-5)


def tiny_model(**overrides) -> CADNet:
    hp = dict(hidden=4, leak_slope=0.1, p_drop=0.0, dropout_sites=["input", "hidden", "logits"], K=2, beta=0.8,
              direction="push", lambda_ent=0.3)
    hp.update(overrides)
    torch.manual_seed(0)
    return CADNet(CADNetConfig.from_hparams(hp, in_features=5, num_classes=3))


def forward(model: CADNet, x, edges):
    return model(x, EdgeListGraph(edges, x.size(0), model.cfg.aggregation.direction))


def test_cadnet_forward_by_composition():
    edges = random_graph(seed=1)
    x = torch.rand(7, 5)
    model = tiny_model().eval()
    out = forward(model, x, edges)
    logits = model.embed2(F.leaky_relu(model.embed1(x), 0.1))
    z, node_entropy, gamma = aggregate(model.cfg.aggregation, logits, edges=edges)
    assert torch.allclose(out.log_probs[:, 0], F.log_softmax(z, -1), atol=1e-6)
    assert out.regularizer.shape == (1,)
    assert torch.allclose(out.regularizer, 0.3 * node_entropy.mean(0, keepdim=True))  # CAD-Net's own loss term
    assert torch.allclose(out.log_probs.exp().sum(-1), torch.ones(7, 1), atol=1e-5)


def test_cadnet_sparse_input_equals_dense_input():
    edges = random_graph(seed=2)
    x = torch.rand(7, 5) * (torch.rand(7, 5) > 0.5)
    model = tiny_model().eval()
    dense = forward(model, x, edges)
    sparse = forward(model, x.to_sparse().coalesce(), edges)
    assert torch.allclose(dense.log_probs, sparse.log_probs, atol=1e-6)


def test_entropy_uses_undropped_logits_when_logits_are_dropped():
    edges = random_graph(seed=4)
    x = torch.rand(7, 5)
    model = tiny_model(p_drop=0.5, dropout_sites=["logits"], lambda_ent=1.0).train()
    out = forward(model, x, edges)
    clean_logits = model.embed2(F.leaky_relu(model.embed1(x), 0.1))
    assert torch.allclose(out.regularizer, entropy(clean_logits.softmax(-1)).mean(0, keepdim=True), atol=1e-6)


def test_logit_dropout_applies_to_the_diffused_and_self_terms():
    """Where the table drops the logits (Cora, CiteSeer), the dropped logits are what AdaCAD
    diffuses and interpolates, while P (and so T and gamma) comes from the undropped ones."""
    edges = random_graph(seed=4)
    x = torch.rand(7, 5)
    model = tiny_model(p_drop=0.5, dropout_sites=["logits"]).train()
    torch.manual_seed(11)
    out = forward(model, x, edges)
    logits = model.embed2(F.leaky_relu(model.embed1(x), 0.1))
    torch.manual_seed(11)  # the logit mask is the forward pass's only random draw
    dropped = F.dropout(logits, 0.5, True)
    z, _, _ = aggregate(model.cfg.aggregation, logits, dropped, edges)
    assert torch.allclose(out.log_probs[:, 0], F.log_softmax(z, -1), atol=1e-6)
    undropped, _, _ = aggregate(model.cfg.aggregation, logits, logits, edges)
    assert not torch.allclose(out.log_probs[:, 0], F.log_softmax(undropped, -1), atol=1e-3)


def test_dropout_sites_are_respected():
    edges = random_graph(seed=6)
    x = torch.rand(7, 5)
    no_sites = tiny_model(p_drop=0.9, dropout_sites=[]).train()
    eval_out = forward(no_sites.eval(), x, edges).log_probs
    assert torch.allclose(forward(no_sites.train(), x, edges).log_probs, eval_out)
    with_input = tiny_model(p_drop=0.9, dropout_sites=["input"]).train()
    assert not torch.allclose(forward(with_input, x, edges).log_probs, eval_out)


def test_sparse_dropout_scales_kept_values_and_keeps_pattern():
    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]).to_sparse().coalesce()
    torch.manual_seed(1)
    dropped = sparse_dropout(x, 0.5, training=True)
    kept = dropped.values() != 0
    assert torch.equal(dropped.indices(), x.indices())
    assert torch.allclose(dropped.values()[kept], 2 * x.values()[kept])
    assert sparse_dropout(x, 0.5, training=False) is x
