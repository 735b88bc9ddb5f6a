"""Dispatch: where a cell's chunks train. A chunk is the unit of work: replicas (a cell's seeds,
or seeds of several cells) trained side by side by the one loop, or one seed with its
single-seed network. An engine takes a family's chunks and hands back each chunk's records as it
finishes; the train stage saves them.

- :class:`LocalEngine`, the default: this machine. Batched chunks one after another in this
  process, or on a CPU side by side in joblib's worker processes (``chunk_workers``); single
  seeds in joblib's worker processes (``n_jobs``) on a CPU.
- :class:`ClusterEngine`: a Dask cluster (``distributed``), named by the environment variable
  ``CADNET_CLUSTER``: a scheduler's address (``tcp://host:8786``) or its scheduler file. The
  chunks run on its workers (on a worker's GPU where it has one and ``device`` is ``auto``) and
  their records come back through Dask to the stage's machine. A worker lost mid-chunk costs
  that chunk only: Dask runs it again elsewhere, and every chunk that came back was saved.

Either way a chunk computes the same numbers: a seed depends on its settings and seed only
(a baseline's dropout stream on its fixed chunk too, which the stage hands over whole).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import subprocess
import sys
import threading
import time
from itertools import takewhile
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from pipeline import config
from pipeline.engine.device import device_label, resolve_device_name
from pipeline.engine.loop import Replica, TrainingError, train_replicas
from pipeline.engine.memory import peak_bytes
from pipeline.engine.plan import chunk_workers, workers_side_by_side

CLUSTER_VARIABLE = "CADNET_CLUSTER"
CONNECT_SECONDS = 20  # for the scheduler to answer
WORKERS_SECONDS = 60  # for its first worker
# Methods whose CPU seeds each run in a process of their own, which gives back all its memory
# when it ends. Graph U-Net's pooled graphs once came from torch's CSR x CSR product, which on
# the CPU (torch 2.13, MKL) never gives its output's memory back (17 MB an epoch on Cora; one
# long-lived worker was killed after seven seeds). Its product is now SciPy's, the same numbers
# without the growth (pipeline.models.baselines.csr_product); a seed's own process stays, as a
# guard against any other growth, at the cost of one process start a seed of several minutes.
FRESH_PROCESS_PER_SEED = {"graph_unet"}


class Chunk(NamedTuple):
    """What one engine task trains: ``replicas`` side by side (``batched``), or each on its own
    with the method's single-seed network."""
    method: str
    replicas: list[Replica]
    batched: bool


def run_chunk(chunk: Chunk, graph: dict, device_setting: str) -> list[dict]:
    """The chunk's records, one per replica in order, each naming the device that trained it
    (``device_setting`` is resolved where the chunk runs)."""
    device = resolve_device_name(device_setting)
    if device == "cpu" and chunk.method in FRESH_PROCESS_PER_SEED:
        records = in_fresh_process(chunk, graph)
    else:
        records = train_replicas(graph, chunk.replicas, device, chunk.method, batched=chunk.batched)
    for record in records:
        record["device"] = device_label(device)
    return records


def in_fresh_process(chunk: Chunk, graph: dict) -> list[dict]:
    """:func:`run_chunk` on the CPU in a Python process of its own, which gives all its memory
    back when it ends (a pool's worker, joblib's or Dask's, lives on). A plain child process,
    since a Dask worker's own processes may not have children of the multiprocessing kind."""
    done = subprocess.run([sys.executable, "-m", "pipeline.engine.dispatch"], capture_output=True,
                          input=pickle.dumps((chunk, graph)), cwd=Path(__file__).resolve().parents[2])
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {done.returncode}"]
        raise TrainingError(f"a seed's own process failed: {lines[-1]}")
    return pickle.loads(done.stdout)


def exit_with_parent(poll_seconds: float = 1.0) -> None:
    """In a worker process: exit as soon as the process that started it is gone. A train stage
    killed outright (kill -9, the machine's OOM killer) cannot stop its workers itself, and
    joblib's would go on training for nobody. Started once per worker."""
    global _WATCHING_PARENT
    if _WATCHING_PARENT:
        return
    _WATCHING_PARENT = True
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


_WATCHING_PARENT = False


# ------------------------------------------------------------------------------ this machine


@functools.lru_cache(maxsize=1)
def _graph_in_worker(dataset: str, rule, project: str) -> dict:
    """Each joblib worker loads the graph once instead of receiving a pickled copy per seed,
    from the stage's project folder (joblib may reuse a worker started from another)."""
    import torch

    from pipeline.engine.cells import load_cell_graph

    torch.set_num_threads(1)
    os.chdir(project)
    return load_cell_graph(dataset, rule)


def _run_in_worker(chunk: Chunk, dataset: str, rule, device_setting: str, project: str) -> list[dict]:
    exit_with_parent()
    return run_chunk(chunk, _graph_in_worker(dataset, rule, project), device_setting)


class LocalEngine:
    """This machine: everything on a GPU one after another in this process; on a CPU, single
    seeds in ``n_jobs`` joblib processes side by side, and batched chunks in ``chunk_workers``
    of them (1: one after another in this process), as many as fit the memory budget."""
    name = "this machine"

    def __init__(self, n_jobs: int = -1, chunk_workers: int = 1, memory_budget_gb: float = 6):
        self.n_jobs, self.chunk_workers, self.budget = n_jobs, chunk_workers, memory_budget_gb * 2**30

    def workers(self, chunks: list[Chunk], graph: dict, device: str) -> int:
        """Worker processes for ``chunks`` (1: this process, one after another)."""
        if not any(c.batched for c in chunks):
            workers = workers_side_by_side(True, device, self.n_jobs)
        else:
            peak = max(peak_bytes(graph, c.replicas[0].hp, len(c.replicas)) for c in chunks)
            workers = chunk_workers(device, self.chunk_workers, peak, self.budget)
        return min(workers, len(chunks))

    def run(self, chunks: list[Chunk], graph: dict, source: tuple[str, object], device_setting: str,
            may_start: Callable[[Chunk], bool]) -> Iterator[tuple[int, list[dict]]]:
        """Each chunk's index and records as it finishes; ``source`` (dataset, feature rule) is
        where a worker process loads the graph from. No chunk starts once ``may_start`` says no:
        a worker is handed a chunk only when one is free (joblib takes one task at a time from
        the generator, ``pre_dispatch`` as many as workers), and asks then."""
        from joblib import Parallel, delayed

        workers = self.workers(chunks, graph, resolve_device_name(device_setting))
        if workers == 1:
            for index, chunk in enumerate(chunks):
                if not may_start(chunk):
                    return
                yield index, run_chunk(chunk, graph, device_setting)
            return
        startable = takewhile(lambda pair: may_start(pair[1]), enumerate(chunks))
        jobs = (delayed(_indexed)(index, _run_in_worker, chunk, *source, device_setting, str(Path.cwd()))
                for index, chunk in startable)
        yield from Parallel(n_jobs=workers, return_as="generator_unordered", batch_size=1,
                            pre_dispatch="n_jobs")(jobs)

    def close(self) -> None:
        pass


def _indexed(index: int, function, *args):
    return index, function(*args)


# ------------------------------------------------------------------------------ a Dask cluster


def code_digest() -> str:
    """A digest of this process's ``pipeline`` package sources: a worker must train with the
    code the stage's specs name."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _workers_code_digest() -> str:
    """:func:`code_digest` as the worker's own module computes it (sent by name, not by value)."""
    return code_digest()


_GRAPHS: dict[str, dict] = {}


def _the_graph(graph_bytes: bytes) -> bytes:
    return graph_bytes


def _run_on_worker(chunk: Chunk, graph_key: str, graph_bytes: bytes, device_setting: str) -> bytes:
    """A Dask task: the chunk's records as pickled bytes (Dask's own serialisers do not take
    torch's sparse tensors). The graph is unpickled once per worker and family."""
    if graph_key not in _GRAPHS:
        _GRAPHS.clear()
        _GRAPHS[graph_key] = pickle.loads(graph_bytes)
    return pickle.dumps(run_chunk(chunk, _GRAPHS[graph_key], device_setting))


class ClusterEngine:
    """A Dask cluster's workers. At most two chunks a worker thread are handed over at once,
    so that a deadline still stops what has not started and the stage's memory stays small."""

    def __init__(self, address: str):
        from distributed import Client

        self.name = f"the Dask cluster at {address}"
        where = f"{CLUSTER_VARIABLE}: {address!r}"
        kwargs = {"scheduler_file": address} if Path(address).is_file() else {"address": address}
        try:
            self.client = Client(**kwargs, timeout=f"{CONNECT_SECONDS}s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as err:
            raise config.ConfigError(f"{where}: no Dask scheduler answers there ({str(err).splitlines()[0][:160]}); "
                                     f"start one (README, Running on a cluster) or unset {CLUSTER_VARIABLE}") from None
        try:
            self.client.wait_for_workers(1, timeout=WORKERS_SECONDS)
        except TimeoutError:
            self.client.close()
            raise config.ConfigError(f"{where}: the scheduler has no workers after {WORKERS_SECONDS} s; "
                                     f"start some (`dask worker {address}`)") from None
        self.check_code(where)

    def check_code(self, where: str) -> None:
        """Every worker imports this checkout's code, or the stage stops before training."""
        ours = code_digest()
        try:
            theirs = self.client.run(_workers_code_digest)
        except Exception as err:
            self.client.close()
            raise config.ConfigError(f"{where}: a worker cannot import this project's `pipeline` "
                                     f"({type(err).__name__}: {str(err)[:120]}); start the workers in its "
                                     f"environment (pip install -e . in this checkout)") from None
        for worker, digest in sorted(theirs.items()):
            if digest != ours:
                self.client.close()
                raise config.ConfigError(f"{where}: worker {worker} runs other code than this checkout's "
                                         f"`pipeline`; start the workers from this checkout's environment")

    def run(self, chunks: list[Chunk], graph: dict, source: tuple[str, object], device_setting: str,
            may_start: Callable[[Chunk], bool]) -> Iterator[tuple[int, list[dict]]]:
        from distributed import as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        graph_bytes = pickle.dumps(graph)
        graph_key = hashlib.sha256(graph_bytes).hexdigest()
        # a task of its own rather than scattered data, so that Dask makes it again where the
        # worker holding it is lost
        graph_future = self.client.submit(_the_graph, graph_bytes, key=f"graph-{graph_key}", pure=False)
        slots = 2 * max(1, sum(self.client.nthreads().values()))
        todo = list(enumerate(chunks))[::-1]
        running = as_completed(loop=self.client.loop)
        in_flight: dict = {}  # each future handed over and not yet yielded: its chunk's index

        def hand_over() -> None:
            while todo and len(in_flight) < slots and may_start(todo[-1][1]):
                index, chunk = todo.pop()
                future = self.client.submit(_run_on_worker, chunk, graph_key, graph_future, device_setting, pure=False)
                in_flight[future] = index
                running.add(future)
            if todo and not in_flight:  # the deadline: nothing runs, nothing more starts
                todo.clear()

        hand_over()
        try:
            for future in running:
                try:
                    records = pickle.loads(future.result())
                except KilledWorker as err:
                    raise TrainingError(f"the cluster lost every worker that ran one chunk ({err}); "
                                        f"the chunks that came back are saved, run it again") from None
                except FutureCancelledError:
                    raise TrainingError("the cluster cancelled a chunk (its scheduler or client went away); "
                                        "the chunks that came back are saved, run it again") from None
                yield in_flight.pop(future), records
                future.release()
                hand_over()
        finally:  # an error or Ctrl-C: the chunks not finished are not wanted
            self.client.cancel(list(in_flight))
            graph_future.release()

    def close(self) -> None:
        self.client.close()


@contextlib.contextmanager
def engine(params: dict):
    """The engine that ``CADNET_CLUSTER`` names (unset or empty: this machine), closed after."""
    address = os.environ.get(CLUSTER_VARIABLE, "").strip()
    chosen = ClusterEngine(address) if address else LocalEngine(
        params.get("n_jobs", -1), params.get("chunk_workers", 1), params.get("memory_budget_gb", 6))
    try:
        yield chosen
    finally:
        chosen.close()


if __name__ == "__main__":  # in_fresh_process's child: (chunk, graph) pickled in, its records pickled out
    exit_with_parent()
    sent_chunk, sent_graph = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(train_replicas(sent_graph, sent_chunk.replicas, "cpu", sent_chunk.method,
                                                        batched=sent_chunk.batched)))
