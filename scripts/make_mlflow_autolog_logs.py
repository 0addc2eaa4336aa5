"""Make tests/data/mlflow/keras_autolog/ with the real packages: an MLflow file store of one
run that ``mlflow.tensorflow.autolog()`` wrote while Keras trained a tiny model.

Run from the repo root (CPU, about half a minute; nothing leaves the machine)::

    python scripts/make_mlflow_autolog_logs.py

Needs ``tensorflow-cpu``, ``keras`` and ``mlflow-skinny`` (``pip install tensorflow-cpu keras
mlflow-skinny``; made with tensorflow 2.21.0, keras 3.15.1, mlflow-skinny 3.18.0).

The model: a dense 8 -> 16 -> 1 regression on 256 random rows (seed 0), batch size 32 (8 batches
an epoch), Adam, 4 epochs, a 25% validation split (so 6 batches an epoch). Autolog's defaults
log every epoch: metrics ``loss``, ``val_loss`` (and ``learning_rate`` where Keras reports it)
at step = the epoch number (0-based), the tag ``mlflow.autologging = tensorflow``, the fit
arguments as params (``batch_size``, ``epochs``, ...). Models are not logged
(``log_models=False``, ``checkpoint=False``) and the run's artifacts folder (a model summary,
TensorBoard copies of the same metrics) is not copied, to keep it small. The run is started by
autolog itself (no ``mlflow.start_run``), as in the autolog examples, so it has autolog's tags.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "mlflow" / "keras_autolog"


def main() -> None:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import keras
    import mlflow
    import numpy as np

    work = Path(tempfile.mkdtemp())
    mlflow.set_tracking_uri((work / "mlruns").as_uri())
    mlflow.set_experiment("keras-autolog")
    mlflow.tensorflow.autolog(log_models=False, log_datasets=False, checkpoint=False)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    y = (x @ rng.normal(size=(8, 1)) + 0.1 * rng.normal(size=(256, 1))).astype("float32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    # no start_run: autolog starts the run itself, and tags it mlflow.autologging
    model.fit(x, y, batch_size=32, epochs=4, validation_split=0.25, verbose=0)
    mlflow.end_run()
    if OUT.exists():
        shutil.rmtree(OUT)
    shutil.copytree(work / "mlruns", OUT / "mlruns", ignore=_empty_artifacts)
    shutil.rmtree(work)
    print(f"wrote {OUT}", file=sys.stderr)


def _empty_artifacts(folder: str, names: list[str]) -> list[str]:
    """The artifacts (a model summary, TensorBoard copies of the metrics) are not kept."""
    return [n for n in names if n == "artifacts"]


if __name__ == "__main__":
    main()
