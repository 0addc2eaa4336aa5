"""Reading runs in worker processes (issue 18, item 1): the same runs, in the same order,
with the same points, facts and findings as one process reads them; an unreadable run and
runs that share a name are handled alike. Real HF runs copied into a sweep of 18."""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import runcompare as rc
from runcompare.analysis import compare
from runcompare.load.roots import runs_likely
from runcompare.parallel import cores, run_all

from .conftest import DATA


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Six real seed runs three times over, in folders a/, b/ and c/ (so every name is
    shared by three runs), and one folder whose trainer_state.json is not JSON."""
    root = tmp_path_factory.mktemp("parallel")
    for group in "abc":
        for run in sorted((DATA / "hf_seeds").glob("lr*")):
            shutil.copytree(run, root / group / run.name)
    broken = root / "a" / "broken"
    broken.mkdir()
    (broken / "trainer_state.json").write_text("{not json")  # hand-written damage
    return root


def _paths(root):
    return [root / group for group in "abc"]


def test_worker_processes_give_what_one_process_gives(sweep):
    one = rc.load_many(_paths(sweep), settings=["seq_len=64"], cache=False)
    two = rc.load_many(_paths(sweep), settings=["seq_len=64"], cache=False, workers=2)
    # with the cache: workers send the stream they wrote (cold), then the one they read (warm)
    cold = rc.load_many(_paths(sweep), settings=["seq_len=64"], workers=2)
    warm = rc.load_many(_paths(sweep), settings=["seq_len=64"], workers=2)
    assert [r.name for r in two] == [r.name for r in one]
    assert len(one) == 18 and one[0].name == "a/lr1e-3_seed1"  # names made unique
    for a, *others in zip(one, two, cold, warm):
        for b in others:
            assert b.scalars.equals(a.scalars) and b.to_json() == a.to_json()
            assert b.findings == a.findings and b.hparams == a.hparams
    skipped = [f for f in one[0].findings if f.code == "run-skipped"]
    assert len(skipped) == 1 and "broken" in skipped[0].message


def test_the_comparison_json_is_the_same(sweep, cli):
    one = compare(rc.load_many(_paths(sweep), settings=["seq_len=64"]))
    two = compare(rc.load_many(_paths(sweep), settings=["seq_len=64"], workers=2))
    assert json.dumps(two.to_json(), sort_keys=True) == json.dumps(one.to_json(), sort_keys=True)
    via_cli = cli.json(*_paths(sweep), "--set", "seq_len=64", "--no-report")  # auto workers
    assert [r["name"] for r in via_cli["runs"]] == [r.name for r in one.runs]
    assert via_cli["verdict"] == one.to_json()["verdict"]


def test_progress_counts_every_run_as_it_is_done(sweep):
    seen = []
    rc.load_many(_paths(sweep), settings=["seq_len=64"], workers=2,
                 progress=lambda done, total, name: seen.append((done, total)))
    assert seen == [(n, 19) for n in range(20)]


def test_a_name_freed_by_a_run_that_cannot_be_read_is_the_same(tmp_path):
    """a/lr1e-3_seed1 and b/lr1e-3_seed1 would be told apart by their folders, but b's cannot
    be read: the one run left is named lr1e-3_seed1, in workers as in one process."""
    shutil.copytree(DATA / "hf_seeds" / "lr1e-3_seed1", tmp_path / "a" / "lr1e-3_seed1")
    broken = tmp_path / "b" / "lr1e-3_seed1"
    broken.mkdir(parents=True)
    (broken / "trainer_state.json").write_text("{not json")  # hand-written damage
    paths = [tmp_path / "a" / "lr1e-3_seed1", broken]
    one = rc.load_many(paths, cache=False)
    two = rc.load_many(paths, cache=False, workers=2)
    assert [r.name for r in one] == [r.name for r in two] == ["lr1e-3_seed1"]
    assert two[0].to_json() == one[0].to_json() and two[0].scalars.equals(one[0].scalars)
    assert [f.code for f in two[0].findings] == [f.code for f in one[0].findings]
    assert "run-skipped" in [f.code for f in one[0].findings]


def _where(task):
    if task == 13:
        raise ValueError("task 13 fails")
    time.sleep(0.04)  # 128 of them: 5 s in this process alone, so a slow fork server still
    # starts its worker while chunks are left
    return task, os.getpid(), gc.get_freeze_count()


def test_this_process_works_beside_the_pool_and_the_order_is_kept():
    done = run_all(_where, list(range(100, 228)), workers=2)
    assert [task for task, _, _ in done] == list(range(100, 228))
    pids = {pid for _, pid, _ in done}
    assert os.getpid() in pids and len(pids) == 2  # the last chunks here, the first in a worker


def test_a_worker_starts_with_the_imports_frozen_out_of_the_collector():
    """The fork server freezes what its imports made (gc.freeze) before it forks a worker: no
    worker's collection walks them, and the fork server exits without walking them."""
    done = run_all(_where, list(range(100, 228)), workers=2)
    frozen = {count for _, pid, count in done if pid != os.getpid()}
    assert frozen and min(frozen) > 10_000  # runcompare.load and polars: ~40,000 objects


def _blas(task):
    time.sleep(0.04)  # as _where: the worker starts while chunks are left
    return os.getpid(), os.environ.get("OPENBLAS_NUM_THREADS")


def test_a_worker_loads_numpy_with_one_blas_thread_unless_the_user_set_a_count():
    """The fork server sets OPENBLAS_NUM_THREADS=1 before its imports load numpy (no reader
    multiplies a matrix, and the threads OpenBLAS starts spin on the cores the read needs); a
    count the user set is kept, and this process's environment is left as it was."""
    before = os.environ.get("OPENBLAS_NUM_THREADS")
    done = run_all(_blas, list(range(64)), workers=2)
    assert {blas for pid, blas in done if pid != os.getpid()} == {before or "1"}
    assert os.environ.get("OPENBLAS_NUM_THREADS") == before
    script = ("import os\nfrom runcompare.parallel import run_all\nfrom tests.test_parallel "
              "import _blas\nprint(sorted({blas for pid, blas in run_all(_blas, range(64), "
              "workers=2) if pid != os.getpid()}))")
    for given, seen in ((None, "['1']"), ("3", "['3']")):  # a fresh fork server each
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              check=True, cwd=DATA.parent.parent,
                              env=env if given is None else {**env, "OPENBLAS_NUM_THREADS": given})
        assert done.stdout.split("\n")[0] == seen


def test_an_error_in_any_task_is_raised_in_the_caller():
    with pytest.raises(ValueError, match="task 13 fails"):
        run_all(_where, list(range(10, 74)), workers=2)  # a worker's chunk
    with pytest.raises(ValueError, match="task 13 fails"):
        run_all(_where, list(range(74, 12, -1)), workers=2)  # this process's chunk


_STARTED = ("import multiprocessing.forkserver as f, os, sys\n"
            "from runcompare import parallel\n"
            "if sys.argv[3] == 'query':\n"
            "    import polars as pl\n"
            "    pl.DataFrame({'a': [2, 1]}).sort('a')  # starts polars' threads\n"
            "if sys.argv[3] == 'lazy':  # as if the pool forked no worker at its first task\n"
            "    parallel.multiprocessing.active_children = lambda: []\n"
            "parallel.start_workers(int(sys.argv[1]), None if sys.argv[2] == 'none' "
            "else int(sys.argv[2]))\n"
            "print('forked' if parallel._forked else 'server' if f._forkserver._forkserver_pid "
            "else 'none')")


@pytest.mark.parametrize(("tasks", "workers", "before", "started"), [
    (400, "none", "", "forked" if cores() > 1 else "none"), (400, "2", "", "forked"),
    (400, "2", "query", "server"), (400, "2", "lazy", "server"), (400, "1", "", "none"),
    (3, "none", "", "none")])
def test_the_workers_start_early_only_for_a_pool(tasks, workers, before, started):
    """``start_workers`` starts the workers before the tasks are found only when ``run_all``
    would use a pool for them (400 runs on more than one core, or two workers asked for):
    forked from this process while it has run no polars query (and the pool forks them all
    at its first task), else the fork server."""
    done = subprocess.run([sys.executable, "-c", _STARTED, str(tasks), workers, before],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == [started]


_FORKED = """
import json, multiprocessing, multiprocessing.forkserver as f, sys
import runcompare as rc
from runcompare import parallel
paths = sys.argv[1:]
parallel_runs = rc.load_many(paths, settings=["seq_len=64"], cache=False, workers=2)
left = [len(multiprocessing.active_children()), len(parallel._forked)]  # none: it ended
server = f._forkserver._forkserver_pid is not None  # not started: the worker was forked
one = rc.load_many(paths, settings=["seq_len=64"], cache=False)
print(json.dumps({"runs": len(one), "left": left, "server": server, "same": [
    a.scalars.equals(b.scalars) and a.to_json() == b.to_json() and a.findings == b.findings
    for a, b in zip(one, parallel_runs, strict=True)]}))
"""


def test_workers_forked_from_a_fresh_process_give_what_one_process_gives(sweep):
    """A fresh process (a command, a script) forks its worker as it starts finding the runs:
    the same runs, points and findings as one process reads, and the worker ends with the
    read. No ``if __name__ == "__main__":`` is needed (this one is ``python -c``)."""
    done = subprocess.run([sys.executable, "-c", _FORKED, *map(str, _paths(sweep))],
                          capture_output=True, text=True, check=True, cwd=DATA.parent.parent)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"runs": 18, "left": [0, 0], "server": False, "same": [True] * 18}


_UNUSED = ("import multiprocessing, sys\n"
           "from runcompare import parallel\n"
           "parallel.start_workers(400, 2)\n"
           "started = len(multiprocessing.active_children())\n"
           "parallel.stop_workers()\n"
           "print(started, len(multiprocessing.active_children()), len(parallel._forked))")


def test_workers_forked_for_runs_not_found_are_ended():
    """Workers forked for the runs a folder seemed to hold end when the read does not use
    them (a path with one run, or an error before the runs are read)."""
    done = subprocess.run([sys.executable, "-c", _UNUSED], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["1", "0", "0"]


def test_an_error_before_the_runs_are_read_ends_the_forked_worker(tmp_path):
    """``--set seed1:...`` names two runs (a/seed1, b/seed1): refused once the runs are found,
    before they are read, and the worker forked for them is ended."""
    script = ("import multiprocessing, sys\nimport runcompare as rc\n"
              "from runcompare.errors import UsageError\n"
              "try:\n    rc.load_many(sys.argv[1:], workers=2, settings=['seed1:seq_len=1'])\n"
              "except UsageError as exc:\n    print(type(exc).__name__)\n"
              "print(len(multiprocessing.active_children()))")
    for group in "ab":
        for seed in ("seed1", "seed2"):
            shutil.copytree(DATA / "hf_seeds" / f"lr1e-3_{seed}", tmp_path / group / seed)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "a"),
                           str(tmp_path / "b")], capture_output=True,
                          text=True, check=True, cwd=DATA.parent.parent)
    assert done.stdout.split() == ["UsageError", "0"]


def test_the_runs_a_folder_may_hold_are_guessed_from_its_folders():
    assert runs_likely(DATA / "hf_seeds") == 6
    assert runs_likely(DATA / "hf_resumed") == 2  # runs/ and wandb/; not its checkpoints
    assert runs_likely(DATA / "hf_seeds" / "lr1e-3_seed1" / "trainer_state.json") == 1


_COMMAND = ("import multiprocessing.forkserver as f, sys\n"
            "from runcompare.cli import main\n"
            "sys.argv = ['runcompare', *sys.argv[1:]]\n"
            "try:\n"
            "    main()  # the command but its exit (console's skips the rest)\n"
            "finally:\n"
            "    print('fork server', f._forkserver._forkserver_pid is not None, file=sys.stderr)")


@pytest.mark.skipif(cores() < 2, reason="a command reads with workers on more than one core")
def test_the_command_forks_its_worker_with_its_progress_bar_drawn(sweep):
    """The command's progress bar starts at its first update, after the worker is forked:
    its thread would make the command start the fork server instead."""
    done = subprocess.run([sys.executable, "-c", _COMMAND, *map(str, _paths(sweep)),
                           "--set", "seq_len=64", "--no-report"], capture_output=True, text=True,
                          env={**os.environ, "FORCE_COLOR": "1"}, cwd=DATA.parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\x1b[" in done.stderr and "reading" in done.stderr  # the bar was drawn
    assert re.findall(r"fork server (True|False)", done.stderr) == ["False"]
