"""Dispatch (pipeline/engine/dispatch.py): chunks on this machine or on a real Dask cluster
(two worker processes of one thread each, started here), the same records either way, and a
worker lost mid-chunk costing that chunk only."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest
import torch

from pipeline import config
from pipeline.engine import dispatch
from pipeline.engine.loop import Replica, TrainingError
from test_adacad_batched import hparams, synthetic_graph

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    """A local Dask cluster: two worker processes, one thread each, as on a 2-core machine."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


def _chunks(hp: dict, blocks: list[list[int]], method: str = "cadnet", batched: bool = True) -> list[dispatch.Chunk]:
    return [dispatch.Chunk(method, [Replica(hp, seed) for seed in block], batched) for block in blocks]


def _same(a: dict, b: dict) -> bool:
    """Bit for bit: the whole history, the selection and the adaptive weights."""
    return (a["seed"] == b["seed"] and a["history"] == b["history"] and a["test_acc"] == b["test_acc"]
            and a["selected_epoch"] == b["selected_epoch"] and torch.equal(a["gamma"], b["gamma"]))


@pytest.mark.parametrize("method, batched", [("cadnet", True), ("gcn", False)])
def test_the_cluster_gives_each_chunk_the_records_this_machine_gives(cluster, method, batched):
    graph, hp = synthetic_graph(), hparams(epochs=8, early_stop_window=0, p_drop=0.3)
    if method != "cadnet":
        hp = config.hparams_for(config.load_params(), "cora", method) | {"epochs": 8, "early_stop_window": 0}
    chunks = _chunks(hp, [[0, 1], [2, 3], [4]] if batched else [[0], [1], [2]], method, batched)
    engine = dispatch.ClusterEngine(cluster.scheduler_address)
    try:
        got = dict(engine.run(chunks, graph, ("cora", None), "cpu", lambda chunk: True))
    finally:
        engine.close()
    assert sorted(got) == [0, 1, 2]
    for index, chunk in enumerate(chunks):
        here = dispatch.run_chunk(chunk, graph, "cpu")
        assert [r["device"] for r in got[index]] == ["cpu"] * len(chunk.replicas)
        assert all(_same(a, b) for a, b in zip(here, got[index])), index


class ExecutionLog(distributed.WorkerPlugin):
    """Each task a worker starts or finishes, with the worker's process id, one JSON line."""

    def __init__(self, path: str):
        self.path = path

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" or start == "executing":
            with open(self.path, "a") as log:
                log.write(json.dumps({"key": str(key), "pid": os.getpid(), "to": finish}) + "\n")


def test_a_worker_killed_mid_chunk_costs_that_chunk_only(cluster, tmp_path):
    """Five chunks on two workers; once the first comes back, the worker running another is
    killed (kill -9). Every chunk comes back with this machine's records; the lost chunk ran
    twice, every other chunk once."""
    graph, hp = synthetic_graph(), hparams(epochs=100, early_stop_window=0)
    chunks = _chunks(hp, [[k] for k in range(5)])
    log = tmp_path / "executions.jsonl"
    engine = dispatch.ClusterEngine(cluster.scheduler_address)
    engine.client.register_plugin(ExecutionLog(str(log)), name="execution-log")
    got, killed = {}, None
    try:
        for index, records in engine.run(chunks, graph, ("cora", None), "cpu", lambda chunk: True):
            got[index] = records
            if killed is None:
                while killed is None:  # the other worker is mid-chunk: find it by the log
                    lines = [json.loads(line) for line in log.read_text().splitlines()]
                    running = {e["key"]: e["pid"] for e in lines if e["to"] == "executing"}
                    for e in lines:
                        if e["to"] != "executing":
                            running.pop(e["key"], None)
                    chunk_keys = [k for k in running if k.startswith("_run_on_worker")]
                    if chunk_keys:
                        killed = chunk_keys[0]
                        os.kill(running[killed], signal.SIGKILL)
                    else:
                        time.sleep(0.01)
    finally:
        engine.client.unregister_worker_plugin("execution-log")
        engine.close()
    assert sorted(got) == list(range(5))
    for index, chunk in enumerate(chunks):
        assert all(_same(a, b) for a, b in zip(dispatch.run_chunk(chunk, graph, "cpu"), got[index])), index
    starts = [json.loads(line)["key"] for line in log.read_text().splitlines() if json.loads(line)["to"] == "executing"]
    runs = {key: starts.count(key) for key in starts if key.startswith("_run_on_worker")}
    assert len(runs) == 5 and runs.pop(killed) == 2 and set(runs.values()) == {1}, runs


def test_no_chunk_starts_past_the_deadline(cluster):
    """``may_start`` says no after the first chunk: nothing else is handed over."""
    graph, hp = synthetic_graph(), hparams(epochs=3, early_stop_window=0)
    asked = []
    engine = dispatch.ClusterEngine(cluster.scheduler_address)
    try:
        got = list(engine.run(_chunks(hp, [[0], [1], [2]]), graph, ("cora", None), "cpu",
                              lambda chunk: asked.append(chunk) or len(asked) == 1))
    finally:
        engine.close()
    assert [index for index, _ in got] == [0]


def test_a_cluster_that_does_not_answer_is_one_line_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(dispatch.CLUSTER_VARIABLE, "tcp://127.0.0.1:9")  # the discard port: nobody listens
    monkeypatch.setattr(dispatch, "CONNECT_SECONDS", 1)
    with pytest.raises(config.ConfigError) as info:
        with dispatch.engine({}):
            pass
    message = str(info.value)
    assert message.startswith("CADNET_CLUSTER: 'tcp://127.0.0.1:9': no Dask scheduler answers there") and "\n" not in message


def test_workers_with_other_code_are_refused_before_anything_trains(cluster, monkeypatch):
    monkeypatch.setattr(dispatch, "code_digest", lambda: "this checkout's code, edited")
    with pytest.raises(config.ConfigError, match=r"runs other code than this checkout's"):
        dispatch.ClusterEngine(cluster.scheduler_address)


def test_an_error_in_a_chunk_on_the_cluster_is_the_chunks_own(cluster):
    """A loss that diverges on a worker comes back as the loop's one-line error."""
    graph, hp = synthetic_graph(), hparams(epochs=3, early_stop_window=0)
    graph["x"] = torch.sparse_coo_tensor(graph["x"].indices(), torch.full_like(graph["x"].values(), float("nan")),
                                         graph["x"].shape).coalesce()
    engine = dispatch.ClusterEngine(cluster.scheduler_address)
    try:
        with pytest.raises(TrainingError, match=r"seed 0: training loss is nan"):
            list(engine.run(_chunks(hp, [[0]]), graph, ("cora", None), "cpu", lambda chunk: True))
    finally:
        engine.close()
