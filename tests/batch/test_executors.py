"""The three executors give the same results.jsonl (statuses, exit codes, artifact hashes).

Ray and Dask run on this machine (2 CPUs; a local Ray, a Dask LocalCluster), one start each;
each test is skipped only when its extra (tokfst[ray], tokfst[dask]) is not installed."""

from __future__ import annotations

import pytest

from tokfst_cli.batch import run

from .common import EXPECTED, INPUTS, make_inputs, outcome, request


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_inputs(tmp_path_factory.mktemp("in"))


@pytest.fixture(scope="module")
def local(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    run.run(run.plan(request(inputs, out)))
    got = outcome(out, inputs)
    assert {k: v[0] for k, v in got.items()} == {k: EXPECTED.get(k, "compiled") for k in INPUTS}
    return got


@pytest.mark.parametrize("executor", ["ray", "dask"])
def test_an_executor_gives_the_local_results(executor, inputs, local, tmp_path):
    pytest.importorskip({"ray": "ray", "dask": "dask.distributed"}[executor])
    summary = run.run(run.plan(request(inputs, tmp_path, executor=executor)))
    assert outcome(tmp_path, inputs) == local
    assert summary["ran"] == len(INPUTS) and summary["executor"] == executor
