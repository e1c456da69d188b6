"""The cluster executors: the same tasks on Ray or on Dask, each run by :func:`task.isolated`.

A remote worker process prepares the tokenizer once (``task.prepare``, memoized per process) and
runs every task it is given in a child forked from itself under the task limits, so an input
that aborts or runs past its time costs that child, not the worker: the records are those of the
local executor (``task.execute`` makes them), and the driver writes every artifact and the
results file. Tasks carry the inputs' text, so workers need no shared file system; the tokenizer
must load on every worker (a bundled name, a hub name in each worker's cache, or a path every
node has).

Ray: ``address`` a running cluster's (``ray://host:10001`` or ``host:6379``); None starts a
local Ray with ``jobs`` CPUs. Dask: ``address`` a distributed scheduler's (``tcp://host:8786``);
None starts a ``LocalCluster`` of ``jobs`` single-threaded worker processes.
"""

from __future__ import annotations

from collections.abc import Iterator

from tokfst_cli.batch import task as task_mod
from tokfst_cli.batch.task import Limits, Task
from tokfst_cli.errors import InputError

Result = tuple[Task, dict, "bytes | None"]


def _missing(extra: str, module: str) -> InputError:
    return InputError(f"the {extra} executor needs {module}, which is not installed",
                      f"pip install 'tokfst[{extra}]'", hint="batch-extra", extra=extra)


def ray_run(tasks: list[Task], jobs: int, limits: Limits, address: str | None = None) -> Iterator[Result]:
    """Each task's (task, record, bytes) from Ray, in the order they finish."""
    try:
        import ray  # deferred: an optional dependency (tokfst[ray]), heavy to import
    except ImportError:
        raise _missing("ray", "ray") from None
    started = not ray.is_initialized()
    if started:
        options = {"address": address} if address else {"num_cpus": jobs}
        ray.init(**options, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
                 configure_logging=False)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(task_mod.isolated)
        refs = {remote.remote(t, limits): t for t in tasks}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                t = refs.pop(ref)
                try:
                    yield t, *ray.get(ref)
                except ray.exceptions.RayError as e:  # the worker itself died (a node lost, a SIGKILL)
                    yield t, task_mod.failed(t, "crashed", f"the Ray worker failed: {type(e).__name__}", 1), None
    finally:
        if started:
            ray.shutdown()


def dask_run(tasks: list[Task], jobs: int, limits: Limits, address: str | None = None) -> Iterator[Result]:
    """Each task's (task, record, bytes) from Dask, in the order they finish."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed  # deferred: optional (tokfst[dask]), heavy
    except ImportError:
        raise _missing("dask", "dask.distributed") from None
    cluster = None if address else LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                                dashboard_address=None, silence_logs=50)
    client = Client(address or cluster, set_as_default=False)
    try:
        futures = client.map(task_mod.isolated, tasks, limits=limits, pure=False, retries=0,
                             key=[f"tokfst-{i}-{t.key[:16]}" for i, t in enumerate(tasks)])
        which = dict(zip(futures, tasks))
        for fut in as_completed(futures, loop=client.loop):
            t = which[fut]
            try:
                yield t, *fut.result()
            except Exception as e:  # noqa: BLE001 - the worker itself died (KilledWorker) or was lost
                yield t, task_mod.failed(t, "crashed", f"the Dask worker failed: {type(e).__name__}", 1), None
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
