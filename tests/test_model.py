"""The maths of pipeline/model.py on graphs small enough to check by hand."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from pipeline.model import (
    CADNet,
    ClassAttentiveDiffusion,
    adacad,
    adaptive_weight,
    class_attentive_transition,
    entropy,
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


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_adacad_equals_matrix_form_eq10(direction):
    edges = random_graph(seed=3)
    logits = torch.randn(7, 3)
    self_term = torch.randn(7, 3)  # e.g. dropped logits: diffused, but P comes from `logits`
    diffusion = ClassAttentiveDiffusion(2, direction)
    z, node_entropy, gamma = adacad(logits, self_term, edges, diffusion, beta=0.7)

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


def test_batched_shapes_equal_per_model_results():
    """[N, S, C] input gives, per slice s, what the [N, C] call gives: the batched engine's basis."""
    edges = random_graph(seed=5)
    logits = torch.randn(7, 4, 3)
    diffusion = ClassAttentiveDiffusion(3, "push")
    z, ent, gamma = adacad(logits, logits, edges, diffusion, beta=0.8)
    for s in range(4):
        z_s, ent_s, gamma_s = adacad(logits[:, s], logits[:, s], edges, diffusion, beta=0.8)
        assert torch.allclose(z[:, s], z_s, atol=1e-6)
        assert torch.allclose(ent[:, s], ent_s)
        assert torch.allclose(gamma[:, s], gamma_s)


def tiny_model(**overrides) -> CADNet:
    kwargs = dict(in_features=5, hidden=4, num_classes=3, leak_slope=0.1, p_drop=0.0,
                  dropout_sites=["input", "hidden", "logits"], K=2, beta=0.8, direction="push")
    kwargs.update(overrides)
    torch.manual_seed(0)
    return CADNet(**kwargs)


def test_cadnet_forward_by_composition():
    edges = random_graph(seed=1)
    x = torch.rand(7, 5)
    model = tiny_model().eval()
    out = model(x, edges)
    logits = model.embed2(F.leaky_relu(model.embed1(x), 0.1))
    z, node_entropy, gamma = adacad(logits, logits, edges, model.diffusion, 0.8)
    assert torch.allclose(out.log_probs, F.log_softmax(z, -1), atol=1e-6)
    assert torch.allclose(out.entropy, node_entropy)
    assert torch.allclose(out.log_probs.exp().sum(-1), torch.ones(7), atol=1e-5)


def test_cadnet_sparse_input_equals_dense_input():
    edges = random_graph(seed=2)
    x = torch.rand(7, 5) * (torch.rand(7, 5) > 0.5)
    model = tiny_model().eval()
    dense = model(x, edges)
    sparse = model(x.to_sparse().coalesce(), edges)
    assert torch.allclose(dense.log_probs, sparse.log_probs, atol=1e-6)


def test_entropy_uses_undropped_logits_when_logits_are_dropped():
    edges = random_graph(seed=4)
    x = torch.rand(7, 5)
    model = tiny_model(p_drop=0.5, dropout_sites=["logits"]).train()
    out = model(x, edges)
    clean_logits = model.embed2(F.leaky_relu(model.embed1(x), 0.1))
    assert torch.allclose(out.entropy, entropy(clean_logits.softmax(-1)), atol=1e-6)


def test_dropout_sites_are_respected():
    edges = random_graph(seed=6)
    x = torch.rand(7, 5)
    no_sites = tiny_model(p_drop=0.9, dropout_sites=[]).train()
    eval_out = no_sites.eval()(x, edges).log_probs
    assert torch.allclose(no_sites.train()(x, edges).log_probs, eval_out)
    with_input = tiny_model(p_drop=0.9, dropout_sites=["input"]).train()
    assert not torch.allclose(with_input(x, edges).log_probs, eval_out)


def test_sparse_dropout_scales_kept_values_and_keeps_pattern():
    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]).to_sparse().coalesce()
    torch.manual_seed(1)
    dropped = sparse_dropout(x, 0.5, training=True)
    kept = dropped.values() != 0
    assert torch.equal(dropped.indices(), x.indices())
    assert torch.allclose(dropped.values()[kept], 2 * x.values()[kept])
    assert sparse_dropout(x, 0.5, training=False) is x
