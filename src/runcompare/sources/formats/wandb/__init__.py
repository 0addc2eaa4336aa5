"""The W&B formats and the helpers they share.

- :mod:`.run_folder`: ``wandb``, the run folders the wandb client writes (``wandb/run-*/``,
  ``wandb/offline-run-*/``), read offline from their ``.wandb`` file;
- :mod:`.export`: ``wandb-export``, history exported from the server (the web app's panel CSV,
  the API's history as CSV, JSON lines or parquet).

Helpers of both (never a format; the two formats import them, never each other):
:mod:`._proto` (the ``Record`` fields of a ``.wandb`` file), :mod:`._history` (history records
decoded in bulk), :mod:`._leg` (one run folder decoded into a :class:`~._leg.Leg`) and
:mod:`._steps` (history put on its step metric).
"""
