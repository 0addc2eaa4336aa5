"""Fuzz the native line scanner (sources/textlog/_scan.c) under AddressSanitizer and
UndefinedBehaviorSanitizer.

Builds the extension with ``-fsanitize=address,undefined`` into a copy of the source tree,
then runs itself again in a Python that preloads the sanitizer runtimes: the real Megatron,
nanoGPT and HF stdout logs are read whole and in 600-byte chunks, and slices of them with
random bytes changed are scanned with their layouts. Any memory error or undefined behaviour
stops it with the sanitizer's report. Needs gcc; a few minutes::

    python scripts/fuzz_scanner.py [--rounds 3000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "runcompare" / "sources" / "textlog" / "_scan.c"


def build(tree: Path) -> dict[str, str]:
    """The sanitized extension in a copy of src/ under ``tree``; the environment to run it."""
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("*.so"))
    target = tree / "src" / "runcompare" / "sources" / "textlog" / (
        "_scan" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["gcc", "-O1", "-g", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-shared",
                    "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o",
                    str(target)], check=True)
    runtimes = [subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True,
                               text=True, check=True).stdout.strip()
                for lib in ("libasan.so", "libubsan.so")]
    return {**os.environ, "LD_PRELOAD": ":".join(runtimes), "ASAN_OPTIONS": "detect_leaks=0",
            "PYTHONPATH": str(tree / "src")}


def fuzz(rounds: int) -> None:
    from runcompare.sources.formats import hf_stdout, megatron, nanogpt
    from runcompare.sources.textlog import layout as _layout
    from runcompare.sources.textlog import lines as _lines

    built = Path(_layout._scan.__file__) if _layout._scan else None
    assert built and str(built).startswith(os.environ["PYTHONPATH"]), f"not the sanitized {built}"
    print(f"scanner: {built}", flush=True)
    logs = {hf_stdout: [ROOT / "sample_logs" / "attn", ROOT / "sample_logs" / "mamba",
                        ROOT / "tests" / "data" / "hf_resumed",
                        ROOT / "tests" / "data" / "text" / "hf4x_attn"],
            megatron: [ROOT / "tests" / "data" / "text" / "megatron_ramp",
                       ROOT / "tests" / "data" / "text" / "megatron_restart"],
            nanogpt: [ROOT / "tests" / "data" / "text" / "nanogpt"]}
    for source, paths in logs.items():
        for path in paths:
            for chunk in (16 << 20, 600):
                _lines.CHUNK_BYTES = chunk
                source.read(path)
    _lines.CHUNK_BYTES = 16 << 20
    rng = random.Random(1)
    layouts = [(hf_stdout._dict_layout, ROOT / "sample_logs" / "attn" / "train.log"),
               (megatron._train_layout, logs[megatron][0] / "train.log"),
               (nanogpt._iter_layout, logs[nanogpt][0] / "train.log")]
    for make, file in layouts:
        data = file.read_bytes()
        layout = make(data)
        assert layout is not None, file
        for _ in range(rounds):
            start = rng.randrange(len(data))
            piece = bytearray(data[start:start + rng.randrange(3000)])
            for _ in range(rng.randrange(6)):
                if piece:
                    piece[rng.randrange(len(piece))] = rng.randrange(256)
            _layout._scan.scan(bytes(piece), layout.program, layout.slots)
        print(f"{file.relative_to(ROOT)}: {rounds} damaged slices scanned", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000)
    args = parser.parse_args()
    if os.environ.get("FUZZ_STAGE") == "sanitized":
        fuzz(args.rounds)
        print("no sanitizer report")
        return
    with tempfile.TemporaryDirectory() as tree:
        env = build(Path(tree)) | {"FUZZ_STAGE": "sanitized"}
        sys.exit(subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds)],
                                check=False, env=env).returncode)


if __name__ == "__main__":
    main()
