"""The one training loop (pipeline/engine/loop.py) against hand-computed values: the early-stopping
rule, model selection, Adam with amsgrad and the lr schedules, the method's loss terms, and
logit dropout in the batched network."""
from __future__ import annotations

import math

import pytest
import torch

from conftest import SHIPPED_PARAMS
from pipeline import config
from pipeline.engine import loop, splits
from pipeline.models import REGISTRY
from pipeline.models.adacad import CADNet, CADNetConfig
from pipeline.models.adacad_batched import BatchedCADNet
from pipeline.models.seeds import SeedStreams, dropout
from test_adacad_batched import CLASSES, FEATURES, hparams, synthetic_graph
from test_baselines import settings


# ------------------------------------------------------------------------ early stopping


def test_early_stopping_window_excludes_the_current_epoch():
    # previous two epochs (1.0, 2.0) average 1.5 < 1.6: stop. With the current epoch in the
    # window the mean would be (2.0 + 1.6) / 2 = 1.8 > 1.6: no stop.
    assert loop.should_stop_early([1.0, 2.0, 1.6], epoch=6, epochs=10, window=2)
    assert not loop.should_stop_early([1.0, 2.0, 1.4], epoch=6, epochs=10, window=2)


def test_early_stopping_only_after_half_the_epochs_and_never_without_window():
    rising = [1.0, 2.0, 3.0]
    assert not loop.should_stop_early(rising, epoch=5, epochs=10, window=2)  # epoch <= epochs // 2
    assert loop.should_stop_early(rising, epoch=6, epochs=10, window=2)
    assert not loop.should_stop_early(rising, epoch=6, epochs=10, window=0)


def test_a_validation_loss_equal_to_the_windows_mean_does_not_stop():
    # the rule is "greater than", not "at least": previous (1.0, 2.0) average exactly 1.5
    assert not loop.should_stop_early([1.0, 2.0, 1.5], epoch=6, epochs=10, window=2)
    assert loop.should_stop_early([1.0, 2.0, 1.5 + 2 ** -20], epoch=6, epochs=10, window=2)


def test_loop_stops_each_seed_at_the_first_epoch_the_rule_fires():
    graph = synthetic_graph(1)
    hp = hparams(epochs=40, early_stop_window=3, split="per_class", lr=0.1)
    for record in loop.train_chunk(graph, hp, [0, 1, 2, 3]):
        losses = record["history"]["val_loss"]
        fired = [e for e in range(1, hp["epochs"] + 1)
                 if e <= len(losses) and loop.should_stop_early(losses[:e], e, hp["epochs"], 3)]
        assert record["epochs_run"] == (fired[0] if fired else hp["epochs"])
        # the selected epoch is the one of lowest validation loss among the epochs run
        assert record["selected_epoch"] == 1 + min(range(len(losses)), key=losses.__getitem__)


@pytest.mark.parametrize("method,batched", [("cadnet", True), ("cadnet", False), ("gcn", True)])
def test_the_reported_accuracies_are_those_of_the_epoch_of_lowest_validation_loss(method, batched):
    """Each seed's test and validation accuracy, and its best validation loss, are its history's
    at the selected epoch, the epoch of lowest validation loss; here some seeds select an epoch
    before their last one, and their last epoch's test accuracy is another, so the report
    cannot be the last epoch's by chance."""
    from test_baselines import SETTINGS

    graph = synthetic_graph(2)
    changes = dict(epochs=60, lr=0.3, lr_drop_every=0, weight_decay=0.0, split="per_class", hidden=16)
    hp = {**SETTINGS, **REGISTRY[method].fixed, **changes} if REGISTRY[method].table_keys else hparams(method, **changes)
    records = loop.train_chunk(graph, hp, [0, 1, 2, 3], method=method, batched=batched)
    telling = 0
    for r in records:
        history, epoch = r["history"], r["selected_epoch"]
        assert epoch == 1 + min(range(r["epochs_run"]), key=history["val_loss"].__getitem__)
        assert r["test_acc"] == pytest.approx(history["test_acc"][epoch - 1], abs=1e-7)
        assert r["val_acc"] == pytest.approx(history["val_acc"][epoch - 1], abs=1e-7)
        assert r["best_val_loss"] == pytest.approx(history["val_loss"][epoch - 1], rel=1e-6)
        telling += history["test_acc"][epoch - 1] != history["test_acc"][-1]
    assert telling >= 1, "no seed tells the selected epoch from the last: make the test harder"


def test_each_seed_trains_and_is_scored_on_its_own_split():
    """With a split per seed (Amazon/Coauthor), seed s of a chunk sees split_masks(..., s): its
    first-epoch training loss is that of its initial network on its own training nodes (lr so
    small that the one step before the eval pass changes nothing measurable)."""
    from pipeline.models.seeds import masked_nll

    graph = synthetic_graph(3)
    hp = hparams(split="per_class", lr=1e-9, lr_drop_every=0, weight_decay=0.0, epochs=1, p_drop=0.0)
    records = loop.train_chunk(graph, hp, [0, 1, 2])
    for seed, record in zip([0, 1, 2], records):
        net = loop.build_net(graph, hp, "cadnet", [seed], batched=True).eval()
        with torch.no_grad():
            log_probs = net().log_probs
        losses = {s: float(masked_nll(log_probs, graph["y"], splits.split_masks(graph, hp, s)[0].view(-1, 1))[0])
                  for s in (0, 1, 2)}
        assert record["history"]["train_loss"][0] == pytest.approx(losses[seed], rel=1e-5)
        others = [s for s in losses if s != seed]
        assert all(abs(losses[s] - losses[seed]) > 1e-4 for s in others), "splits too alike to tell apart"


@pytest.mark.parametrize("name", sorted(m for m in REGISTRY if REGISTRY[m].table_keys is not None))
def test_every_baseline_trains_with_its_weight_decay(name):
    """The shipped weight decay reaches each baseline's settings, and the loop applies it: two
    epochs with a large decay train another network than without (same seed, same masks)."""
    block = SHIPPED_PARAMS["method_hparams"][REGISTRY[name].hparams_of or name]
    for dataset in ("cora", "pubmed", "photo"):
        expected = (block.get(dataset) or {}).get("weight_decay", block["weight_decay"])
        assert config.hparams_for(SHIPPED_PARAMS, dataset, name)["weight_decay"] == expected
    from test_baselines import SETTINGS

    graph, entry = synthetic_graph(4), REGISTRY[name]
    # its shipped optimiser (MixHop's is SGD), so each optimiser path is the one under test
    shipped = config.hparams_for(SHIPPED_PARAMS, "cora", name)
    optimiser = {k: shipped[k] for k in ("optimizer", "lr_decrement_every", "lr_decrement") if k in shipped}
    runs = {wd: loop.train_chunk(graph, {**SETTINGS, **entry.fixed, **optimiser, "weight_decay": wd, "epochs": 2,
                                         "p_drop": 0.0},
                                  [0], method=name, batched=entry.batched)[0]
            for wd in (0.0, 0.5)}
    assert runs[0.0]["history"]["train_loss"][1] != pytest.approx(runs[0.5]["history"]["train_loss"][1], rel=1e-6)


# ------------------------------------------------------------------------ the optimiser


def test_adam_with_amsgrad_by_hand():
    """Two steps on one parameter with gradients 1 then 0.01: the second-moment estimate falls,
    so amsgrad keeps the first step's (larger) one in the denominator."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer, scheduler = loop.make_optimizer([param], dict(lr=0.1, weight_decay=0.0, lr_drop_every=0))
    assert scheduler is None
    for grad in (1.0, 0.01):
        optimizer.zero_grad()
        param.grad = torch.tensor([grad])
        optimizer.step()
    b1, b2, lr = 0.9, 0.999, 0.1
    m1, v1 = (1 - b1) * 1.0, (1 - b2) * 1.0
    p1 = -lr * (m1 / (1 - b1)) / (math.sqrt(v1 / (1 - b2)) + 1e-8)
    m2, v2 = b1 * m1 + (1 - b1) * 0.01, b2 * v1 + (1 - b2) * 0.01 ** 2
    assert v2 < v1
    amsgrad = p1 - lr * (m2 / (1 - b1 ** 2)) / (math.sqrt(max(v1, v2)) / math.sqrt(1 - b2 ** 2) + 1e-8)
    plain = p1 - lr * (m2 / (1 - b1 ** 2)) / (math.sqrt(v2) / math.sqrt(1 - b2 ** 2) + 1e-8)
    assert param.item() == pytest.approx(amsgrad, rel=1e-5)
    assert abs(amsgrad - plain) > 10 * 1e-5 * abs(amsgrad)  # well outside the tolerance: the case tells them apart


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_each_optimiser_decays_the_weights(optimizer):
    """One step with a zero gradient moves a parameter only through its weight decay: SGD by
    lr x decay x value; Adam (decay added to the gradient) by about lr against its sign."""
    param = torch.nn.Parameter(torch.tensor([2.0]))
    hp = dict(optimizer=optimizer, lr=0.1, weight_decay=0.5, lr_drop_every=0, lr_decrement_every=1, lr_decrement=0.0)
    opt, _ = loop.make_optimizer([param], hp)
    param.grad = torch.zeros(1)
    opt.step()
    expected = 2.0 - 0.1 * 0.5 * 2.0 if optimizer == "sgd" else 2.0 - 0.1
    assert param.item() == pytest.approx(expected, rel=1e-5)


def test_weight_decay_on_every_parameter_and_step_lr_drop():
    graph = synthetic_graph()
    net = loop.build_net(graph, hparams(), "cadnet", [0, 1], batched=True)
    optimizer, scheduler = loop.make_optimizer(net.parameters(), hparams(lr_drop_every=2, lr_drop_factor=0.5))
    grouped = [p for group in optimizer.param_groups for p in group["params"]]
    assert len(grouped) == len(list(net.parameters()))
    assert all(g["weight_decay"] == 5e-4 and g["amsgrad"] for g in optimizer.param_groups)
    lrs = []
    for _ in range(5):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([0.03, 0.03, 0.015, 0.015, 0.0075])


def test_sgd_lr_falls_as_the_mixhop_authors_loop_lowers_it():
    """Their loop: step i (from 0) runs at lr, then `if i > 0 and i % every == 0: lr -= ratio *
    lr0`. Epoch e here is their step e - 1; plain SGD (no momentum), weight decay as given."""
    param = torch.nn.Parameter(torch.zeros(1))
    hp = dict(optimizer="sgd", lr=0.5, weight_decay=0.0, lr_decrement_every=3, lr_decrement=0.1, lr_drop_every=0)
    optimizer, scheduler = loop.make_optimizer([param], hp)
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.param_groups[0]["momentum"] == 0
    theirs, lr = [], 0.5
    for i in range(11):
        theirs.append(lr)
        if i > 0 and i % 3 == 0:
            lr -= 0.1 * 0.5
    ours = []
    for _ in range(11):
        ours.append(optimizer.param_groups[0]["lr"])
        param.grad = torch.ones(1)
        optimizer.step()
        scheduler.step()
    assert ours == pytest.approx(theirs)
    assert param.item() == pytest.approx(-sum(theirs))  # plain SGD: each step moves by its lr x 1


# ------------------------------------------------------------------------ loss terms


def test_the_method_loss_term_reaches_the_optimiser():
    """CAD-Net's entropy term is its own (the network returns it); the loop must add it: the
    same seed with lambda_ent 0 and 5 trains differently, and lambda 5 ends with sharper
    predictions (lower training NLL cannot be told apart, so compare the histories)."""
    graph = synthetic_graph()
    runs = {lam: loop.train_seed(graph, hparams(lambda_ent=lam, lr=0.1), 0) for lam in (0.0, 0.0, 5.0)}
    again = loop.train_seed(graph, hparams(lambda_ent=0.0, lr=0.1), 0)
    assert runs[0.0]["history"] == again["history"]  # deterministic ...
    assert runs[5.0]["history"]["train_loss"] != runs[0.0]["history"]["train_loss"]  # ... and the term acts


def test_batched_regularizer_is_lambda_times_mean_entropy_per_seed():
    graph = synthetic_graph()
    net = loop.build_net(graph, hparams(lambda_ent=0.7), "cadnet", [0, 1, 2], batched=True).eval()
    out = net()
    assert out.regularizer.shape == (3,)
    assert torch.all(out.regularizer > 0)
    for s, seed in enumerate((0, 1, 2)):
        single = loop.build_net(graph, hparams(lambda_ent=0.7), "cadnet", [seed], batched=False).eval()()
        torch.testing.assert_close(out.regularizer[s], single.regularizer[0])
    # without the term (cadnet_noent fixes lambda_ent = 0) the network returns zeros
    noent = loop.build_net(graph, hparams("cadnet_noent"), "cadnet_noent", [0, 1], batched=True).eval()
    assert torch.equal(noent().regularizer, torch.zeros(2))


def test_batched_logit_dropout_is_what_gets_diffused():
    """Batched network, dropout at the logits only: the output equals AdaCAD applied to the
    dropped logits (same random draw), not to the undropped ones."""
    graph = synthetic_graph()
    cfg = CADNetConfig.from_hparams(hparams(p_drop=0.5, dropout_sites=["logits"]), FEATURES, CLASSES)
    torch.manual_seed(0)
    net = BatchedCADNet([CADNet(cfg) for _ in range(2)], graph["x"], graph["edge_index"], [4, 5]).train()
    out = net()
    with torch.no_grad():
        hidden = torch.nn.functional.leaky_relu(net._first_layer() + net.b1, cfg.leak_slope)
        logits = torch.einsum("nsh,shc->nsc", hidden, net.w2) + net.b2
        dropped = dropout(logits, 0.5, SeedStreams([4, 5]))  # the forward pass's only draw per stream
        z, _, _ = net.aggregate(logits, dropped, net.graph)
        undropped, _, _ = net.aggregate(logits, logits, net.graph)
    torch.testing.assert_close(out.log_probs, torch.log_softmax(z, -1))
    assert not torch.allclose(out.log_probs, torch.log_softmax(undropped, -1), atol=1e-3)


# ------------------------------------------------------------------------ replicas of several cells


def _same(a: dict, b: dict) -> bool:
    return a["history"] == b["history"] and torch.equal(a["gamma"], b["gamma"]) and a["test_acc"] == b["test_acc"]


@pytest.mark.parametrize("p_drop, other_p_drop", [(0.0, 0.0), (0.4, 0.2)])
def test_a_replica_does_not_depend_on_what_it_is_batched_with(p_drop, other_p_drop):
    """Two cells that differ in beta, lambda_ent, the dropout rate and the label subset, two seeds
    each in one batch: each replica's numbers are bit for bit those it has in a batch of the same
    size holding its own cell only, dropout on or off (its masks come from its own stream, at its
    own rate)."""
    graph = synthetic_graph()
    a = hparams(beta=0.3, p_drop=p_drop, early_stop_window=5)
    b = hparams(beta=0.85, lambda_ent=0.1, p_drop=other_p_drop, split="public_subset", train_per_class=2,
                early_stop_window=5)
    mixed = loop.train_replicas(graph, [loop.Replica(a, 0), loop.Replica(a, 1), loop.Replica(b, 0), loop.Replica(b, 1)])
    only_a = loop.train_chunk(graph, a, [0, 1, 7, 8])
    only_b = loop.train_chunk(graph, b, [7, 8, 0, 1])
    assert _same(mixed[0], only_a[0]) and _same(mixed[1], only_a[1])
    assert _same(mixed[2], only_b[2]) and _same(mixed[3], only_b[3])
    assert mixed[0]["history"] != mixed[2]["history"]  # the two cells did train differently


@pytest.mark.parametrize("p_drop", [0.0, 0.4])
def test_a_replica_equals_its_cell_trained_alone(p_drop):
    """Against the cell's seeds trained alone, in a batch of another size: equal to float32
    rounding (a product's summation order depends on the batch's width), as a seed is across
    chunk sizes; same epochs run and same selected epoch."""
    graph = synthetic_graph()
    cells = [hparams(beta=beta, p_drop=p_drop, early_stop_window=5) for beta in (0.0, 0.55, 1.0)]
    mixed = loop.train_replicas(graph, [loop.Replica(hp, seed) for hp in cells for seed in (0, 1)])
    for i, hp in enumerate(cells):
        for seed, alone in zip((0, 1), loop.train_chunk(graph, hp, [0, 1])):
            replica = mixed[2 * i + seed]
            assert (replica["seed"], replica["epochs_run"], replica["selected_epoch"]) == \
                (seed, alone["epochs_run"], alone["selected_epoch"])
            for key, values in alone["history"].items():
                assert replica["history"][key] == pytest.approx(values, rel=1e-5, abs=1e-6), key


@pytest.mark.parametrize("method, other", [("cadnet", dict(hidden=16)), ("cadnet", dict(lr=0.01)),
                                           ("gcn", dict(split="public_subset", train_per_class=2))])
def test_replicas_that_must_train_apart_are_refused_naming_the_setting(method, other):
    """A setting that shapes the network (hidden) or the optimiser (lr) cannot differ within a
    batch; nor can anything for a method whose seeds share their batch's dropout stream (GCN)."""
    hp = hparams(epochs=2) if method == "cadnet" else settings(method, epochs=2, split="public")
    with pytest.raises(ValueError, match=f"differ in \\['{next(iter(other))}'"):
        loop.train_replicas(synthetic_graph(), [loop.Replica(hp, 0), loop.Replica({**hp, **other}, 1)], method=method)


# ------------------------------------------------------------------------ the host's looks


def test_the_rule_on_the_device_answers_as_the_rule_for_one_seed():
    """Random validation losses (ties and equal means planted): the vectorised rule and the
    readable one agree for every seed, epoch and window."""
    g = torch.Generator().manual_seed(0)
    history = torch.rand(40, 12, generator=g)
    history[:, 0] = 0.5  # a loss equal to its window's mean: no stop
    history[30:, 1] = history[29, 1]
    for window in (0, 1, 3, 10):
        for epoch in range(1, 41):
            vectorised = loop.stops_early(history[:epoch], 40, window).tolist()
            assert vectorised == [loop.should_stop_early(history[:epoch, s].tolist(), epoch, 40, window) for s in range(12)]


def test_how_often_the_host_looks_changes_no_number(monkeypatch):
    """Seeds that stop at different epochs, dropout on: looking every 7 epochs instead of every
    epoch (as on a GPU) gives the same records, bit for bit."""
    graph = synthetic_graph()
    hp = hparams(p_drop=0.3, early_stop_window=3, epochs=40)
    every_epoch = loop.train_chunk(graph, hp, [0, 1, 2, 3])
    assert len({r["epochs_run"] for r in every_epoch}) > 1  # they do stop at different epochs
    monkeypatch.setitem(loop.HOST_CHECK_EVERY, "cpu", 7)
    for a, b in zip(every_epoch, loop.train_chunk(graph, hp, [0, 1, 2, 3])):
        assert _same(a, b) and (a["epochs_run"], a["selected_epoch"]) == (b["epochs_run"], b["selected_epoch"])


def test_a_diverging_seed_is_named_with_its_first_bad_epoch_when_the_host_looks_late(monkeypatch):
    monkeypatch.setitem(loop.HOST_CHECK_EVERY, "cpu", 7)
    hp = hparams(lr=1e30, epochs=20)
    with pytest.raises(loop.TrainingError, match=r"^seed 0: training loss is nan at epoch (\d+);") as err:
        loop.train_chunk(synthetic_graph(), hp, [0, 1])
    monkeypatch.setitem(loop.HOST_CHECK_EVERY, "cpu", 1)
    with pytest.raises(loop.TrainingError) as first:
        loop.train_chunk(synthetic_graph(), hp, [0, 1])
    assert str(err.value) == str(first.value)
