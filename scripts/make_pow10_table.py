"""Write the powers of ten that the native readers round numbers with (Eisel–Lemire) into
src/runcompare/sources/codecs/_decimal.h (the native readers' number rounding), between its
POW10_128 markers.

Each row is 10^e for e in [POW10_MIN, POW10_MAX] as a 128-bit mantissa M (high 64 bits, low
64 bits) with 2^127 <= M < 2^128, rounded down: M = floor(10^e * 2^(127 - floor(log2 10^e))).
The binary exponent is left out: the reader works it out as floor(e * 217706 / 2^16), which
equals floor(log2 10^e) over this range (checked here). tests/test_hf_trainer_native.py works
the table out again and compares it with the source.

    python scripts/make_pow10_table.py
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src/runcompare/sources/codecs/_decimal.h"
#: Below 10^-342 every 19-digit mantissa gives less than the smallest double; above 10^308,
#: more than the largest.
POW10_MIN, POW10_MAX = -342, 308
BLOCK = re.compile(r"(/\* BEGIN POW10_128[^\n]*\n)(.*?)(/\* END POW10_128 \*/)", re.DOTALL)


def mantissa(e: int) -> int:
    """floor(10^e * 2^s), s such that the result has 128 bits."""
    value = Fraction(10) ** e
    bits = value.numerator.bit_length() - value.denominator.bit_length()  # floor(log2) or +1
    if Fraction(2) ** bits > value:
        bits -= 1
    assert bits == (217706 * e) // 65536, e  # the exponent the reader works out
    scaled = value * Fraction(2) ** (127 - bits)
    m = scaled.numerator // scaled.denominator
    assert 1 << 127 <= m < 1 << 128, e
    return m


def table() -> str:
    rows = []
    for e in range(POW10_MIN, POW10_MAX + 1):
        m = mantissa(e)
        rows.append(f"    {{0x{m >> 64:016X}u, 0x{m & (2**64 - 1):016X}u}}, /* 1e{e} */\n")
    return (f"#define POW10_MIN ({POW10_MIN})\n#define POW10_MAX {POW10_MAX}\n"
            "static const uint64_t POW10_128[][2] = {\n" + "".join(rows) + "};\n")


def main() -> None:
    text = SOURCE.read_text()
    if not BLOCK.search(text):
        raise SystemExit(f"{SOURCE}: no POW10_128 markers")
    SOURCE.write_text(BLOCK.sub(lambda m: m.group(1) + table() + m.group(3), text))
    print(f"wrote {POW10_MAX - POW10_MIN + 1} powers of ten into {SOURCE}")


if __name__ == "__main__":
    main()
