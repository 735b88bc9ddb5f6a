"""A Dask cluster for the train stage: ``python -m pipeline.cluster {local,slurm,pbs,sge}
[--workers N] [--cores C] [--memory M] [--walltime T] [--gpu] [--scheduler-file F]``.

Starts a Dask scheduler and its workers, one single-threaded worker a core (a chunk is one
torch process's work), writes the scheduler's file (default ``cluster.json``) and serves until
Ctrl-C. Meanwhile, in this checkout, on this machine or another that reads the file,
``CADNET_CLUSTER=cluster.json dvc repro`` trains the chunks on its workers
(:mod:`pipeline.engine.dispatch`).

- ``local``: ``--workers`` worker processes on this machine: the set-up tried on one machine,
  or one large machine used whole.
- ``slurm``, ``pbs``, ``sge``: dask-jobqueue submits ``--workers`` batch jobs, each of
  ``--cores`` workers with ``--memory`` and ``--walltime``, started in this Python environment
  (so they import this checkout's code); ``--gpu`` makes each SLURM job one worker on one GPU.

A cluster started by hand serves as well: ``dask scheduler --scheduler-file cluster.json`` and,
on each machine, ``dask worker --scheduler-file cluster.json --nthreads 1 --nworkers N``.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from pipeline import config

BATCH_SYSTEMS = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster"}


def start(args: argparse.Namespace):
    """The cluster the arguments describe, its workers asked for."""
    if args.kind == "local":
        from distributed import LocalCluster

        return LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    import dask_jobqueue

    if args.gpu and args.kind != "slurm":
        raise config.ConfigError(f"--gpu: {args.kind} has no one way to ask for a GPU; allowed with: slurm")
    cluster_class = getattr(dask_jobqueue, BATCH_SYSTEMS[args.kind])
    per_job = 1 if args.gpu else args.cores  # worker processes a job, one thread each
    cluster = cluster_class(cores=per_job, processes=per_job, memory=args.memory, walltime=args.walltime,
                            python=sys.executable, scheduler_options={"dashboard_address": None},
                            job_extra_directives=["--gres=gpu:1"] if args.gpu else [])
    cluster.scale(jobs=args.workers)
    return cluster


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["local", *BATCH_SYSTEMS], help="this machine, or a batch system's jobs")
    parser.add_argument("--workers", type=int, default=2, help="local: worker processes; else: batch jobs (default 2)")
    parser.add_argument("--cores", type=int, default=16, help="workers a batch job (default 16)")
    parser.add_argument("--memory", default="64GB", help="memory a batch job (default 64GB)")
    parser.add_argument("--walltime", default="04:00:00", help="a batch job's time limit (default 04:00:00)")
    parser.add_argument("--gpu", action="store_true", help="slurm: each job one worker on one GPU")
    parser.add_argument("--scheduler-file", type=Path, default=Path("cluster.json"),
                        help="where the scheduler's address is written (default cluster.json)")
    args = parser.parse_args(argv)
    for name in ("workers", "cores"):
        if getattr(args, name) < 1:
            raise config.ConfigError(f"--{name}: {getattr(args, name)}; allowed values: an integer >= 1")
    from distributed import Client

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with start(args) as cluster, Client(cluster) as client:
        client.write_scheduler_file(str(args.scheduler_file))
        print(f"cluster: {args.kind} at {cluster.scheduler_address}, written to {args.scheduler_file}; "
              f"train on it with `CADNET_CLUSTER={args.scheduler_file} dvc repro`; Ctrl-C stops it", file=sys.stderr)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
        finally:
            args.scheduler_file.unlink(missing_ok=True)
    print("cluster: stopped", file=sys.stderr)


if __name__ == "__main__":
    config.run_main(main, kept="the seeds its workers finished are saved by the train stage that sent them")
