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


def test_a_cluster_read_keeps_no_whole_runs_here(cluster, sweep, tmp_path, monkeypatch):
    """A worker's cache is its own machine's: the runs a cluster reads are not kept here."""
    from runcompare.cache import cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rc.load_many(sweep, scheduler=cluster)
    assert not list(cache_dir().glob("built/*/*.pack"))
    rc.load_many(sweep[:1])  # read here: kept
    assert len(list(cache_dir().glob("built/*/*.pack"))) == 1


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


def test_export_with_scheduler_has_the_workers_write_the_dataset(cluster, sweep, cli, tmp_path,
                                                                  monkeypatch):
    local = tmp_path / "local.parquet"
    assert cli("export", *sweep, "-o", local).exit_code == 0
    from runcompare import export

    def not_here(*args, **kwargs):
        raise AssertionError("a partition written by the client")

    monkeypatch.setattr(export, "write_part", not_here)  # the workers' processes keep theirs
    there = tmp_path / "there.parquet"
    result = cli("export", *sweep, "-o", there, "--scheduler", cluster)
    assert result.exit_code == 0, result.stderr
    assert "of 12 run(s) as parquet" in result.stdout and "(12 file(s))" in result.stdout
    assert sorted(p.relative_to(there) for p in there.rglob("*.parquet")) == sorted(
        p.relative_to(local) for p in local.rglob("*.parquet"))
    assert export.read_export(there).sort("run", "metric", "step").equals(
        export.read_export(local).sort("run", "metric", "step"))
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no staging left
    again = cli("export", *sweep, "-o", there, "--scheduler", cluster)
    assert again.exit_code == 1 and "already exists; pass --force" in again.stderr
