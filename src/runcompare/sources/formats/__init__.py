"""One module per log format, each exporting one ``FORMAT``; modules whose names start with
``_`` are helpers of a format, named after the one format module that uses them
(``_hf_trainer_json`` of ``hf_trainer``). Formats never import each other. The W&B formats
and the helpers they share are the subpackage :mod:`.wandb`.
"""
