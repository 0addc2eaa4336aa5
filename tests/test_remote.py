"""Remote paths (issue 18, item 2): runs in an S3 bucket (moto's server on 127.0.0.1, which
the tests start) and behind HTTP (Python's http.server on 127.0.0.1) read as on disk, the
mirror downloading only what changed, and ``export -o s3://...``. The runs are the real HF
runs of tests/data/hf_seeds. Credentials and the endpoint come from the environment and
fsspec's config, as a user's would."""

from __future__ import annotations

import functools
import json
import shutil
import socket
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import fsspec
import pytest

import runcompare as rc
from runcompare import remote
from runcompare.export import read_export

from .conftest import DATA


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 holding a sweep of 24 runs (hf_seeds four times, in
    folders g0..g3) in s3://bucket/sweep, and the same sweep on disk."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    patch = pytest.MonkeyPatch()
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        patch.setenv(key, value)
    patch.setitem(fsspec.config.conf, "s3", {"endpoint_url": f"http://127.0.0.1:{port}"})
    disk = tmp_path_factory.mktemp("disk") / "sweep"
    for group in range(4):
        shutil.copytree(DATA / "hf_seeds", disk / f"g{group}")
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("bucket")
    fs.put(f"{disk}/", "bucket/sweep/", recursive=True)
    yield fs, disk
    patch.undo()
    server.stop()


def _without_paths(data: dict) -> dict:
    for run in data["runs"]:
        run.pop("path")
    return data


def test_a_sweep_in_a_bucket_compares_as_it_does_from_disk(s3, cli):
    _, disk = s3
    from_disk = cli.json(disk, "--no-report")
    from_s3 = cli.json("s3://bucket/sweep", "--no-report")
    assert len(from_s3["runs"]) == 24 and from_s3["runs"][0]["name"] == "g0/lr1e-3_seed1"
    assert from_s3["runs"][0]["path"] == "s3://bucket/sweep/g0/lr1e-3_seed1"
    assert _without_paths(from_s3) == _without_paths(from_disk)


def test_a_sweep_of_400_runs_in_a_bucket_compares_as_it_does_from_disk(s3, cli, tmp_path):
    """The issue's size: 400 runs (each the trainer_state.json and config.json of one of the
    six real seed runs, in turn) under s3://bucket/sweep400, against the same folders on disk."""
    fs, _ = s3
    disk = tmp_path / "sweep400"
    seeds = sorted((DATA / "hf_seeds").glob("lr*"))
    for i in range(400):
        run = disk / f"run{i:03d}"
        run.mkdir(parents=True)
        for name in ("trainer_state.json", "config.json"):
            shutil.copy(seeds[i % len(seeds)] / name, run / name)
    fs.put(f"{disk}/", "bucket/sweep400/", recursive=True)
    from_disk = cli.json(disk, "--set", "seq_len=64", "--no-report")
    from_s3 = cli.json("s3://bucket/sweep400", "--set", "seq_len=64", "--no-report")
    assert len(from_s3["runs"]) == 400 and from_s3["runs"][399]["name"] == "run399"
    assert from_s3["runs"][399]["path"] == "s3://bucket/sweep400/run399"
    assert _without_paths(from_s3) == _without_paths(from_disk)


def test_the_mirror_downloads_only_what_changed(s3, monkeypatch):
    fs, _ = s3
    url = "s3://bucket/sweep/g1/lr3e-3_seed2"
    first = rc.load(url, source="hf-trainer")
    fetched = []
    download = remote._download
    monkeypatch.setattr(remote, "_download", lambda fs, pairs: (
        fetched.extend(path for path, _ in pairs), download(fs, pairs)))
    again = rc.load(url, source="hf-trainer")
    assert fetched == [] and again.scalars.equals(first.scalars)
    state = json.loads(fs.cat(f"{url[5:]}/trainer_state.json"))
    for entry in state["log_history"]:  # the same run, its losses one higher
        if "loss" in entry:
            entry["loss"] += 1
    fs.pipe(f"{url[5:]}/trainer_state.json", json.dumps(state).encode())
    changed = rc.load(url, source="hf-trainer")
    assert fetched == [f"{url[5:]}/trainer_state.json"]  # not checkpoint-40's, nor the rest

    def losses(run):
        return run.scalars.filter(metric="train/loss").get_column("value")

    assert (losses(changed) - losses(first)).round(9).unique().to_list() == [1.0]


def test_export_to_a_bucket_writes_the_dataset_there(s3, cli, tmp_path):
    fs, disk = s3
    result = cli("export", "s3://bucket/sweep/g2", "-o", "s3://bucket/out/runs.parquet")
    assert result.exit_code == 0, result.stderr
    assert "to s3://bucket/out/runs.parquet (6 file(s))" in result.stdout
    fs.get("bucket/out/runs.parquet/", str(tmp_path / "got") + "/", recursive=True)
    local = tmp_path / "local.parquet"
    assert cli("export", disk / "g2", "-o", local).exit_code == 0
    assert read_export(tmp_path / "got").sort("run", "metric", "step").equals(
        read_export(local).sort("run", "metric", "step"))
    again = cli("export", "s3://bucket/sweep/g2", "-o", "s3://bucket/out/runs.parquet")
    assert again.exit_code == 2
    assert again.stderr == "error: s3://bucket/out/runs.parquet exists; pass --force to " \
        "replace it\n"


def test_export_with_scheduler_to_a_bucket_has_the_workers_write_it(s3, cli, tmp_path,
                                                                      monkeypatch):
    """``export --scheduler`` into a bucket: each worker of a LocalCluster uploads the
    partitions of the runs it reads (the client writes none), and the dataset equals the
    export of the same runs to disk; nothing is left beside it."""
    from distributed import LocalCluster

    from runcompare import export

    fs, _ = s3
    port = fsspec.config.conf["s3"]["endpoint_url"]
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", port)  # the workers' fsspec reads it
    local = tmp_path / "local.parquet"  # the same runs (another test edits one in the bucket)
    assert cli("export", "s3://bucket/sweep", "-o", local).exit_code == 0
    monkeypatch.setattr(export, "write_part", lambda *a, **k: pytest.fail("client wrote"))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        result = cli("export", "s3://bucket/sweep", "-o", "s3://bucket/sched/runs.parquet",
                     "--scheduler", cluster.scheduler_address)
    assert result.exit_code == 0, result.stderr
    points = read_export(local).height
    assert result.stdout == (f"wrote {points:,} points of 24 run(s) as parquet to "
                             "s3://bucket/sched/runs.parquet (24 file(s))\n")
    assert fs.ls("bucket/sched") == ["bucket/sched/runs.parquet"]  # no staging prefix left
    fs.get("bucket/sched/runs.parquet/", str(tmp_path / "got") + "/", recursive=True)
    assert sorted(p.relative_to(tmp_path / "got") for p in (tmp_path / "got").rglob("*")
                  if p.is_file()) == sorted(p.relative_to(local) for p in local.rglob("*")
                                            if p.is_file())
    assert read_export(tmp_path / "got").sort("run", "metric", "step").equals(
        read_export(local).sort("run", "metric", "step"))


def test_a_missing_key_is_one_line_naming_it(s3, cli):
    result = cli("inspect", "s3://bucket/no/such/run")
    assert result.exit_code == 1
    assert result.stderr == "error: s3://bucket/no/such/run: no such file or directory\n"


@pytest.fixture(scope="module")
def http():
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no request log on stderr
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=DATA))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_run_behind_http_reads_as_on_disk_with_the_sidecar_above_it(http, cli):
    """hf_seeds/runcompare.toml (seq_len = 64) sits above the run: it is mirrored too."""
    url = f"{http}/hf_seeds/lr1e-3_seed1/"
    from_http = cli.json("inspect", url)
    from_disk = cli.json("inspect", DATA / "hf_seeds" / "lr1e-3_seed1")
    assert from_http.pop("path") == url.rstrip("/")
    from_disk.pop("path")
    assert from_http == from_disk and from_http["batch"]["seq_len"]["value"] == 64


def test_an_export_to_a_server_that_refuses_uploads_is_one_line(http, cli):
    """A plain HTTP server answers the upload with 501: one error line naming the URL and
    what to write to instead, no traceback; nothing is written into the served folder."""
    before = sorted(DATA.rglob("*"))
    result = cli("export", DATA / "hf_tokens", "-o", f"{http}/out.parquet")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {http}/out.parquet: cannot be written (")
    assert result.stderr.endswith("write to a local path or a store fsspec can write to "
                                  "(s3://, gs://, az://)\n")
    assert len(result.stderr.splitlines()) == 1 and sorted(DATA.rglob("*")) == before


def test_without_fsspec_a_url_says_how_to_install_it(cli, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "fsspec", None)
    result = cli("inspect", "s3://bucket/sweep")
    assert result.exit_code == 1
    assert result.stderr == ("error: s3://bucket/sweep: reading remote paths needs fsspec; "
                             "install the remote extra: pip install 'runcompare[remote]'\n")
