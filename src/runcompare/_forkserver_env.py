"""Imported first by the workers' fork server (:func:`runcompare.parallel._context`), before
its imports load numpy: numpy's OpenBLAS starts one thread per core when it loads, and they
spin for a while waiting for work that a reader never gives them (no worker multiplies a
matrix). In the fork server they competed for the cores with the process reading meanwhile:
loading runcompare.load took 0.43 s of CPU with them, 0.30 s with one, and a fresh process
reading 400 runs of trainer_state.json cold ended 4% sooner (1.37 s -> 1.31 s, medians of 30
alternating rounds). A thread count the user set is kept."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
