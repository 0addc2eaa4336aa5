"""Reading on a Dask cluster (issue 18, item 3): ``--scheduler ADDRESS`` reads the runs on a
``LocalCluster`` on 127.0.0.1 with the same result as local processes. The runs are the real
HF runs of tests/data/hf_seeds, twice over."""

from __future__ import annotations

import shutil

import pytest
from distributed import LocalCluster

import runcompare as rc

from .conftest import DATA


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as local:
        yield local.scheduler_address


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask")
    for group in ("a", "b"):
        shutil.copytree(DATA / "hf_seeds", root / group)
    return [root / "a", root / "b"]


def test_a_cluster_reads_what_local_processes_read(cluster, sweep):
    here = rc.load_many(sweep, workers=2)
    there = rc.load_many(sweep, scheduler=cluster)
    assert [r.name for r in there] == [r.name for r in here] and len(here) == 12
    for a, b in zip(here, there):
        assert b.scalars.equals(a.scalars) and b.to_json() == a.to_json()


def test_compare_with_scheduler_prints_the_same_json(cluster, sweep, cli):
    local = cli.json(*sweep, "--no-report")
    remote = cli.json(*sweep, "--no-report", "--scheduler", cluster)
    assert remote == local and remote["runs"][0]["name"] == "a/lr1e-3_seed1"


def test_no_scheduler_at_the_address_is_one_line(cli):
    result = cli(DATA / "hf_tokens", DATA / "hf_global32", "--no-report",
                 "--scheduler", "tcp://127.0.0.1:9")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: --scheduler tcp://127.0.0.1:9: no Dask scheduler "
                                    "answers there (")
    assert result.stderr.endswith("start one (`dask scheduler`) or leave out --scheduler\n")
    assert len(result.stderr.splitlines()) == 1
