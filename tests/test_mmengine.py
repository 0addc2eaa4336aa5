"""OpenMMLab (mmengine) vis_data logs (issue #29), on real files from public repositories
(tests/data/mmengine/README.md), held to json.loads of every line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import runcompare as rc
from runcompare.sources import REGISTRY

from .conftest import DATA

PRETRAIN = DATA / "mmengine" / "mmpretrain_resnet50"
RERUN = DATA / "mmengine" / "mmdet_rerun"


def _lines(folder: Path) -> list[dict]:
    text = (folder / "vis_data" / "scalars.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _points(raw, metric: str) -> list[tuple[int, float]]:
    return raw.scalars.filter(metric=metric).sort("step").select("step", "value").rows()


def test_train_lines_at_their_iteration_and_every_scalar_kept():
    raw = REGISTRY["mmengine"].read_at(PRETRAIN)
    train = [r for r in _lines(PRETRAIN) if "iter" in r]
    for key, metric in (("loss", "train/loss"), ("lr", "train/learning_rate"),
                        ("memory", "train/memory")):
        assert _points(raw, metric) == [(r["iter"], r[key]) for r in train]
    assert len(train) == 59 and raw.scalars.height == 59 * 5 + 59 * 3 == 472
    assert _points(raw, "train/loss")[-1] == (4071, 0.05788642740808427)
    assert raw.step_unit == "micro"


def test_epoch_numbered_validation_at_the_iteration_its_epoch_ended(cli):
    # 69 iterations an epoch: the val line of epoch 1 ran after iteration 69, epoch 59's after 4071
    raw = REGISTRY["mmengine"].read_at(PRETRAIN)
    val = [r for r in _lines(PRETRAIN) if "iter" not in r]
    assert _points(raw, "accuracy/top1") == [(69 * r["step"], r["accuracy/top1"]) for r in val]
    assert _points(raw, "accuracy/top1")[0] == (69, 43.13543701171875)
    assert _points(raw, "accuracy/top1")[-1] == (4071, 94.15584564208984)
    # the validation's own timings are kept apart from the train lines' time
    assert _points(raw, "eval/time")[0] == (69, 0.12141144976896398)
    got = cli.json("inspect", PRETRAIN, "--no-cache")
    assert [f["code"] for f in got["findings"]] == ["eval-step-from-epoch"]
    assert "epoch × 69 iterations" in got["findings"][0]["message"]


def test_config_dump_gives_the_batch_facts(cli):
    got = cli.json("inspect", PRETRAIN, "--no-cache")
    assert got["format"] == "mmengine" and got["step_unit"] == "micro"
    assert got["batch"]["per_device_batch"] == {
        "value": 32, "source": "vis_data/config.py: train_dataloader.batch_size"}
    assert got["batch"]["grad_accum"]["value"] == 1
    assert "no accumulative_counts" in got["batch"]["grad_accum"]["source"]
    assert got["steps"] == {"optimizer": 4071, "micro": 4071} and got["points"] == 472
    raw = REGISTRY["mmengine"].read_at(PRETRAIN)
    assert raw.hparams["train_cfg.max_epochs"].value == 100


def test_accumulation_in_the_config_divides_the_iterations(tmp_path):
    # the real config with accumulative_counts added (a variant made here: the input under test)
    run = tmp_path / "run"
    shutil.copytree(PRETRAIN, run)
    config = run / "vis_data" / "config.py"
    text = config.read_text()
    config.write_text(text.replace("optim_wrapper = dict(\n",
                                   "optim_wrapper = dict(\n    accumulative_counts=3,\n"))
    loaded = rc.load(run, cache=False)
    assert loaded.batch.grad_accum.value == 3
    loss = loaded.scalars.filter(metric="train/loss").sort("step")
    assert loss.get_column("step").to_list()[-1] == 4071 // 3 == 1357


def test_a_config_is_read_never_run(tmp_path):
    # hand-written: a config whose values are code; nothing of it may run or become a fact
    run = tmp_path / "run"
    shutil.copytree(PRETRAIN, run)
    marker = tmp_path / "ran"
    (run / "vis_data" / "config.py").write_text(
        f"train_dataloader = dict(batch_size=open({str(marker)!r}, 'w').write('x'))\n"
        "optim_wrapper = dict(accumulative_counts=2 * 2)\n")
    raw = REGISTRY["mmengine"].read_at(run)
    assert not marker.exists()
    assert "per_device_batch" not in raw.facts and "grad_accum" not in raw.facts


def test_a_rerun_appended_to_the_same_file_is_a_leg_whose_points_win(cli):
    raw = REGISTRY["mmengine"].read_at(RERUN)
    lines = _lines(RERUN)
    assert raw.scalars.filter(metric="train/loss").select("step", "leg", "value").rows() == [
        (r["step"], leg, r["loss"]) for r, leg in zip(lines, (0, 0, 1, 1))]
    run = rc.load(RERUN, cache=False, grad_accum=1)
    assert run.scalars.filter(metric="train/loss").sort("step").select(
        "step", "value").rows() == [(1, 40.96456527709961), (2, 40.360042572021484)]


def test_without_a_config_the_accumulation_is_asked_for(cli):
    result = cli("inspect", RERUN, "--no-cache")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "--set mmdet_rerun:grad_accum=N" in result.stderr


def test_the_files_given_alone_are_mmengines(cli):
    for name in ("scalars.json", "20241205_142148.json"):
        got = cli.json("inspect", RERUN / "vis_data" / name, "--no-cache",
                       "--set", "grad_accum=1")
        assert got["format"] == "mmengine" and got["sources"] == ["mmengine"]
    got = cli.json("inspect", RERUN / "vis_data" / "20241205_142148.json", "--no-cache",
                   "--set", "grad_accum=1")
    assert got["steps"]["optimizer"] == 2


def test_an_epoch_whose_end_the_file_cannot_tell_is_left_out_and_said(tmp_path):
    # the real file's first epoch alone (its first two lines: one train line at iteration 69,
    # the validation of epoch 1): one whole epoch cannot show that 69 is where it ended
    vis = tmp_path / "run" / "vis_data"
    vis.mkdir(parents=True)
    lines = (PRETRAIN / "vis_data" / "scalars.json").read_text().splitlines(keepends=True)
    (vis / "scalars.json").write_text("".join(lines[:2]))
    raw = REGISTRY["mmengine"].read_at(tmp_path / "run")
    assert raw.scalars.filter(metric="accuracy/top1").height == 0
    assert raw.scalars.filter(metric="train/loss").height == 1
    codes = [(f.code, f.level) for f in raw.findings]
    assert codes == [("eval-step-unknown", "warning")]
    assert "1 validation line (line 2)" in raw.findings[0].message


def test_a_file_cut_mid_line_keeps_the_whole_lines_and_says_so(tmp_path):
    vis = tmp_path / "run" / "vis_data"
    vis.mkdir(parents=True)
    text = (PRETRAIN / "vis_data" / "scalars.json").read_text()
    (vis / "scalars.json").write_text(text[:-40])
    raw = REGISTRY["mmengine"].read_at(tmp_path / "run")
    assert raw.scalars.filter(metric="accuracy/top1").height == 58
    assert [f.code for f in raw.findings if f.level == "warning"] == ["damaged-input"]


def test_a_work_dir_of_runs(cli, tmp_path):
    for stamp in ("20230605_200941", "20230606_101010"):
        shutil.copytree(PRETRAIN, tmp_path / "work_dirs" / "resnet50_8xb32_in1k" / stamp)
    got = cli.json("inspect", tmp_path / "work_dirs", "--no-cache")
    assert sorted(r["name"] for r in got) == ["resnet50_8xb32_in1k/20230605_200941",
                                              "resnet50_8xb32_in1k/20230606_101010"]
    assert {r["format"] for r in got} == {"mmengine"}


POSE = DATA / "mmengine" / "mmpose_rtmpose_ear" / "20230605_200941"


def test_older_layout_logging_every_iteration(cli):
    # <timestamp>/vis_data/<timestamp>.json, no scalars.json; 6 iterations an epoch logged one
    # by one, the validation of epoch 10 (step 10) ran after iteration 60
    raw = REGISTRY["mmengine"].read_at(POSE)
    lines = [json.loads(line) for line in
             (POSE / "vis_data" / "20230605_200941.json").read_text().splitlines()]
    (val,) = [r for r in lines if "iter" not in r]
    assert val["step"] == 10
    assert _points(raw, "eval/PCK") == [(60, 0.3174603174603175)]
    assert _points(raw, "coco/AP") == [(60, 0.0008910891089108912)]
    assert _points(raw, "coco/AP (M)") == [(60, -1.0)]  # COCO's "no such objects", as logged
    assert _points(raw, "train/loss")[-1] == (71, 0.34041728168725965)
    assert raw.scalars.height == 71 * 6 + 15 == 441


def test_older_layout_config_with_positional_dicts_gives_the_whole_hierarchy(cli):
    # train_dataloader holds dict({0: dict(...), ...}) (keypoint names): still read as data
    got = cli.json("inspect", POSE, "--no-cache")
    batch = {key: value["value"] for key, value in got["batch"].items()}
    assert batch["per_device_batch"] == 32 and batch["grad_accum"] == 1
    assert batch["world_size"] == 1 and batch["global_batch"] == 32
    assert "launcher 'none'" in got["batch"]["world_size"]["source"]
    assert got["samples"] == 71 * 32
    raw = REGISTRY["mmengine"].read_at(POSE)
    assert raw.facts["seed"].value == 21 and raw.facts["learning_rate"].value == 0.004
    assert raw.hparams["train_dataloader.dataset.metainfo.keypoint_info.0.name"].value == "肾上腺"


def test_a_work_dir_of_one_run_is_that_run(cli):
    got = cli.json("inspect", POSE.parent, "--no-cache")
    assert got["name"] == "mmpose_rtmpose_ear"
    assert got["format"] == "mmengine" and got["points"] == 441


def test_epochs_whose_last_iteration_is_not_logged(tmp_path):
    # the real lines of the mmpose run kept as LoggerHook(interval=4, ignore_last=True) would
    # have written them (batch index 4 of each 6-iteration epoch: iterations 4, 10, 16, ...),
    # with the validation line: N = 6 from lines 6 apart, so epoch 10 ended at iteration 60
    vis = tmp_path / "run" / "vis_data"
    vis.mkdir(parents=True)
    lines = (POSE / "vis_data" / "20230605_200941.json").read_text().splitlines(keepends=True)
    kept = [line for line in lines
            if "iter" not in json.loads(line) or json.loads(line)["iter"] % 6 == 4]
    (vis / "scalars.json").write_text("".join(kept))
    raw = REGISTRY["mmengine"].read_at(tmp_path / "run")
    assert _points(raw, "train/loss")[:2] == [(4, 0.4203433021903038), (10, 0.35160491764545443)]
    assert _points(raw, "eval/PCK") == [(60, 0.3174603174603175)]
    assert [f.code for f in raw.findings] == ["eval-step-from-epoch"]


def _variant(tmp_path: Path, change) -> Path:
    """The real mmpretrain file with each line changed by ``change`` (a variant made here, as
    another LoggerHook setting would have written the same lines)."""
    vis = tmp_path / "run" / "vis_data"
    vis.mkdir(parents=True)
    out = [json.dumps(change(record)) for record in _lines(PRETRAIN)]
    (vis / "scalars.json").write_text("\n".join(out) + "\n")
    return tmp_path / "run"


def test_validation_numbered_by_iteration_stays_where_it_is(tmp_path):
    # log_metric_by_epoch=False: the validation's step is runner.iter (69 × epoch)
    run = _variant(tmp_path, lambda r: r if "iter" in r else {**r, "step": 69 * r["step"]})
    raw = REGISTRY["mmengine"].read_at(run)
    assert _points(raw, "accuracy/top1")[:2] == [(69, 43.13543701171875),
                                                 (138, 70.96475219726562)]
    assert raw.findings == []


def test_validation_at_step_0_of_an_iteration_based_run_is_left_out_and_said(tmp_path):
    # an IterBasedTrainLoop with log_metric_by_epoch left True: no epoch in the train lines,
    # and the validation's step is runner.epoch, always 0
    run = _variant(tmp_path, lambda r: {k: v for k, v in r.items() if k != "epoch"}
                   if "iter" in r else {**r, "step": 0})
    raw = REGISTRY["mmengine"].read_at(run)
    assert raw.scalars.filter(metric="accuracy/top1").height == 0
    assert raw.scalars.filter(metric="train/loss").height == 59
    (finding,) = raw.findings
    assert finding.code == "eval-step-unknown" and "59 validation lines (line 2, 4, 6" in \
        finding.message


def test_the_file_given_alone_keeps_its_config(cli):
    got = cli.json("inspect", PRETRAIN / "vis_data" / "scalars.json", "--no-cache")
    assert got["batch"]["per_device_batch"]["value"] == 32 and got["steps"]["optimizer"] == 4071
