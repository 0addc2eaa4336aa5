"""Monte Carlo calibration of the verdict: runs of known truth, and how often each call is made.

The generator is this file's own: a power-law loss over optimizer steps,

    loss(s) = 2 + 3 · (1 + s / 100)^(−0.5) + effect + seed offset + noise,

logged every step (training loss) and every 100 steps (eval loss), global batch 16 × 1,024
tokens, 2,000 steps. A seed offset (sd 0.02 unless said) is one number per run; the point noise
is independent (sd 0.01) or AR(1) (ρ = 0.9, marginal sd 0.01); eval noise is independent, sd
0.005. A/A conditions give both arms the same recipe, A/B ones give arm "b" a true advantage.
Seed groups are three runs per arm. The schedule condition trains one recipe with a cosine
learning rate to 2,000 and to 4,000 steps (LR logged): the loss falls faster as the LR anneals.

Each condition runs ``--trials`` times (200 by default) and prints, as a Markdown table:
the share of each call (clear, unreplicated, within-noise, not-comparable) with a 95% Wilson
interval for "clear"; the coverage of the noise band or interval (does diff ± half-width hold
the true difference of the recipes); and how often the leader is the truly better arm (A/B).
A second table checks the races: crossings of a target read on the training loss against the
noise-free curve's, and the speedup call on A/A runs.

    python benchmarks/calibration.py                 # the tables of docs/calibration.md
    python benchmarks/calibration.py --trials 50     # a quick look
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from runcompare.analysis.compare import rank
from runcompare.model import SCALAR_SCHEMA, BatchConfig, Fact, Run

GLOBAL_BATCH, SEQ_LEN, STEPS = 16, 1024, 2000
EVAL_EVERY = 100


@dataclass(frozen=True)
class Recipe:
    """How one arm's runs are made."""

    effect: float = 0.0          # added to the loss at every step (negative: better)
    seed_sd: float = 0.02        # sd of the per-run offset
    noise_sd: float = 0.01       # marginal sd of the per-point noise
    rho: float = 0.0             # AR(1) coefficient of the per-point noise
    eval_sd: float = 0.005       # sd of the eval noise
    steps: int = STEPS
    schedule: int | None = None  # cosine LR to this many steps (None: no LR logged)


def curve(steps: np.ndarray, recipe: Recipe) -> np.ndarray:
    """The noise-free loss: a power law, and with a cosine schedule a faster fall as the LR
    anneals (the loss tracks the LR's area and its level)."""
    base = 2 + 3 * (1 + steps / 100) ** -0.5 + recipe.effect
    if recipe.schedule is None:
        return base
    lr = _lr(steps, recipe.schedule)
    return base + 0.08 * lr  # a loss still at high LR sits above the annealed one


def _lr(steps: np.ndarray, total: int) -> np.ndarray:
    return 0.5 * (1 + np.cos(np.pi * np.minimum(steps / total, 1.0)))


def _ar1(rng: np.random.Generator, size: int, sd: float, rho: float) -> np.ndarray:
    shocks = rng.normal(0, sd * math.sqrt(1 - rho * rho), size)
    out = np.empty(size)
    out[0] = rng.normal(0, sd)
    for i in range(1, size):
        out[i] = rho * out[i - 1] + shocks[i]
    return out


def make_run(name: str, recipe: Recipe, rng: np.random.Generator, seed: int) -> Run:
    steps = np.arange(1, recipe.steps + 1)
    offset = rng.normal(0, recipe.seed_sd) if recipe.seed_sd else 0.0
    train = curve(steps, recipe) + offset + _ar1(rng, steps.size, recipe.noise_sd, recipe.rho)
    evals = np.arange(EVAL_EVERY, recipe.steps + 1, EVAL_EVERY)
    evaluated = curve(evals, recipe) + offset + rng.normal(0, recipe.eval_sd, evals.size)
    parts = [("train/loss", steps, train), ("eval/loss", evals, evaluated)]
    if recipe.schedule is not None:
        parts.append(("train/learning_rate", steps, 3e-4 * _lr(steps, recipe.schedule)))
    frames = [_points(name, metric, s, v) for metric, s, v in parts]
    batch = BatchConfig(per_device_batch=Fact(GLOBAL_BATCH, "calibration"),
                        grad_accum=Fact(1, "calibration"), world_size=Fact(1, "calibration"),
                        global_batch=Fact(GLOBAL_BATCH, "calibration"),
                        seq_len=Fact(SEQ_LEN, "calibration"),
                        tokens_per_step=Fact(GLOBAL_BATCH * SEQ_LEN, "calibration"))
    facts = {"seed": Fact(seed, "calibration"), "recipe": Fact(repr(recipe), "calibration")}
    if recipe.schedule is not None:
        facts["max_steps"] = Fact(recipe.schedule, "calibration")
    return Run(name=name, path=Path(name), format="calibration", sources=["calibration"],
               step_unit="optimizer", batch=batch, scalars=pl.concat(frames), facts=facts)


def _points(run: str, metric: str, steps: np.ndarray, values: np.ndarray) -> pl.DataFrame:
    tokens = steps * GLOBAL_BATCH * SEQ_LEN
    return pl.DataFrame({
        "run": run, "metric": metric, "value": values, "step": steps, "micro_step": steps,
        "samples": steps * GLOBAL_BATCH, "tokens": tokens, "epoch": steps / 1e4,
        "wall_time": 1.7e9 + steps * 0.5, "elapsed": steps * 0.5,
        "flops": tokens * 6e6, "device_hours": steps * 0.5 / 3600,
    }, schema=SCALAR_SCHEMA)


@dataclass(frozen=True)
class Condition:
    name: str
    a: Recipe
    b: Recipe
    seeds: int = 1                # runs per arm
    metric: str = "train/loss"
    #: whether the truth at the budget is the recipes' (False where the schedules' positions,
    #: not the recipes, make the difference there)
    judged: bool = True

    @property
    def truth(self) -> float:
        """b's true advantage at the budget (a's loss − b's)."""
        budget = np.array([float(min(self.a.steps, self.b.steps))])
        return float(curve(budget, self.a)[0] - curve(budget, self.b)[0])


def conditions() -> list[Condition]:
    r = Recipe
    return [
        Condition("A/A single, seed sd 0.02, iid noise 0.01", r(), r()),
        Condition("A/A single, no seed offset, iid noise 0.01", r(seed_sd=0), r(seed_sd=0)),
        Condition("A/A single, AR(1) rho 0.9 noise, seed sd 0.02", r(rho=0.9), r(rho=0.9)),
        Condition("A/A single, AR(1) rho 0.9 noise, no seed offset", r(rho=0.9, seed_sd=0),
                  r(rho=0.9, seed_sd=0)),
        Condition("A/A single, eval loss, seed sd 0.02", r(), r(), metric="eval/loss"),
        Condition("A/B single, eval loss, b better by 0.01", r(), r(effect=-0.01),
                  metric="eval/loss"),
        Condition("A/A single, cosine to 2,000 vs 4,000 steps", r(schedule=2000),
                  r(schedule=4000, steps=4000), judged=False),
        Condition("A/A seeds 3+3, seed sd 0.02", r(), r(), seeds=3),
        Condition("A/A seeds 3+3, eval loss, seed sd 0.02", r(), r(), seeds=3,
                  metric="eval/loss"),
        Condition("A/B seeds 3+3, b better by 0.1 (5 seed sd)", r(), r(effect=-0.1), seeds=3),
        Condition("A/B single, b better by 0.1 (5 seed sd)", r(), r(effect=-0.1)),
        Condition("A/B single, eval loss, b better by 0.1", r(), r(effect=-0.1),
                  metric="eval/loss"),
    ]


def trial(condition: Condition, rng: np.random.Generator) -> dict[str, object]:
    runs, groups = [], {}
    for arm, recipe in (("a", condition.a), ("b", condition.b)):
        names = [f"{arm}{i}" if condition.seeds > 1 else arm for i in range(condition.seeds)]
        runs += [make_run(n, recipe, rng, seed=i) for i, n in enumerate(names)]
        if condition.seeds > 1:
            groups[arm] = names
    verdict = rank(runs, x="tokens", metrics=[condition.metric], groups=groups or False)
    signed = None
    if verdict.leader is not None and verdict.difference is not None:
        signed = verdict.difference if verdict.leader == "b" else -verdict.difference
    half = (verdict.noise or {}).get("half_width")
    covered = None if signed is None or half is None else abs(signed - condition.truth) <= half
    return {"call": verdict.call, "leader": verdict.leader, "covered": covered,
            "speedup": verdict.race.get("speedup", {}).get("call")}


def wilson(hits: int, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of a share ``hits``/``n``.

    >>> [round(v, 3) for v in wilson(0, 200)], [round(v, 3) for v in wilson(10, 200)]
    ([0.0, 0.019], [0.027, 0.09])
    """
    if n == 0:
        return 0.0, 1.0
    z, p = 1.959963984540054, hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def _share(hits: int, n: int) -> str:
    return f"{hits / n:.1%}" if n else "–"


def table(trials: int, seed: int, progress: Callable[[str], None]) -> str:
    rows = [("| condition | trials | clear (95% CI) | unreplicated | within-noise | "
             "not-comparable | coverage | correct leader | race: clear / unreplicated / tie |"),
            "|---|---|---|---|---|---|---|---|---|"]
    for index, condition in enumerate(conditions()):
        rng = np.random.default_rng([seed, index])
        results = [trial(condition, rng) for _ in range(trials)]
        calls = Counter(r["call"] for r in results)
        low, high = wilson(calls["clear"], trials)
        covered = [r["covered"] for r in results if r["covered"] is not None]
        if not condition.judged:
            covered, correct = [], "–"
        elif condition.truth:
            correct = _share(sum(r["leader"] == "b" for r in results), trials)
        else:
            correct = "–"
        races = Counter(r["speedup"] for r in results)
        race = "/".join(_share(races[c], trials) for c in ("clear", "unreplicated",
                                                          "within-noise"))
        rows.append(f"| {condition.name} | {trials} | {_share(calls['clear'], trials)} "
                    f"({low:.1%}–{high:.1%}) | {_share(calls['unreplicated'], trials)} | "
                    f"{_share(calls['within-noise'], trials)} | "
                    f"{_share(calls['not-comparable'], trials)} | "
                    f"{_share(sum(covered), len(covered)) if covered else '–'} | {correct} | "
                    f"{race} |")
        progress(rows[-1])
    return "\n".join(rows)


def crossing_bias(trials: int, seed: int) -> str:
    """Where a training loss crosses a target reached at 20% and at 60% of the run, on the
    local fit the verdict uses and on the default EMA it used before (half-life 2% of the
    range), against the noise-free curve's crossing: mean relative bias and its spread."""
    from runcompare.analysis.crossing import at_position, crossing
    from runcompare.analysis.smooth import Smoothing
    from runcompare.analysis.summary import metric_series

    rows = ["| target reached at | trials | local fit: bias (sd) | EMA: bias (sd) |",
            "|---|---|---|---|"]
    rng = np.random.default_rng([seed, 99])
    steps = np.arange(1, STEPS + 1)
    for share in (0.2, 0.6):
        goal = float(curve(np.array([share * STEPS]), Recipe())[0])
        true = share * STEPS * GLOBAL_BATCH * SEQ_LEN
        fits, emas = [], []
        for _ in range(trials):
            run = make_run("a", Recipe(seed_sd=0), rng, seed=0)
            verdict = rank([run], x="tokens", metrics=["train/loss"], target=goal, groups=False)
            fits.append(verdict.race["crossings"]["a"] / true - 1)
            span = float(steps[-1] - steps[0]) * GLOBAL_BATCH * SEQ_LEN
            series = metric_series(run, "train/loss", "tokens", Smoothing("x", 0.02 * span))
            position = crossing(series["smoothed"].to_numpy(), goal, higher=False)  # type: ignore[index]
            emas.append(at_position(series["x"].to_numpy(), position) / true - 1)  # type: ignore[index,operator]
        rows.append(f"| {share:.0%} of the run | {trials} | {np.mean(fits):+.2%} "
                    f"({np.std(fits):.2%}) | {np.mean(emas):+.2%} ({np.std(emas):.2%}) |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    text = table(args.trials, args.seed, print)
    bias = crossing_bias(min(args.trials, 100), args.seed)
    print("\n" + bias)
    text += "\n\n" + bias
    print(f"\n{args.trials} trials per condition, seed {args.seed}, "
          f"{time.perf_counter() - started:.0f} s")
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
