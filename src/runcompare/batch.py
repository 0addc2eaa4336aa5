"""The batch hierarchy, written out with units.

    micro-batch       sequences in one forward pass on one device   (per_device_batch)
    per-device batch  micro-batch × gradient accumulation steps     (sequences / device / step)
    global batch      per-device batch × data-parallel replicas     (sequences / optimizer step)
    tokens per step   global batch × sequence length                (tokens / optimizer step)

data_parallel = world_size ÷ (tensor × pipeline × context parallel); world size counts devices
as PyTorch sees them (a dual-die card is two). Micro-steps = optimizer steps × accumulation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import InputError, MissingInfoError
from .model import Finding, Findings

__all__ = ["BatchPlan", "plan_batch"]


@dataclass(frozen=True)
class BatchPlan:
    """Every level of one batch configuration; None where it cannot be computed."""

    per_device_batch: int
    grad_accum: int
    world_size: int
    data_parallel: int
    global_batch: int
    seq_len: int | None
    tokens_per_step: int | None
    max_steps: int | None
    micro_steps: int | None
    total_samples: int | None
    total_tokens: int | None
    findings: Findings = field(default_factory=Findings)

    def __post_init__(self) -> None:
        object.__setattr__(self, "findings", Findings(self.findings))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["findings"] = [f.to_json() for f in self.findings]
        return out


def plan_batch(*, per_device_batch: int, world_size: int | None = None,
               nodes: int | None = None, devices_per_node: int | None = None,
               dies_per_device: int = 1, grad_accum: int | None = None,
               global_batch: int | None = None, tensor_parallel: int = 1,
               pipeline_parallel: int = 1, context_parallel: int = 1,
               seq_len: int | None = None, max_steps: int | None = None) -> BatchPlan:
    """Compute the hierarchy from a micro-batch, the devices, and accumulation or a target.

    With a target ``global_batch`` and no ``grad_accum``: accumulation = target // (micro × DP),
    clamped to ≥ 1, with a warning when the result misses the target.

    >>> p = plan_batch(per_device_batch=8, world_size=256, global_batch=4096, seq_len=1024,
    ...                max_steps=23_842)
    >>> p.grad_accum, p.global_batch, p.tokens_per_step, p.micro_steps, p.total_tokens
    (2, 4096, 4194304, 47684, 100000595968)
    >>> q = plan_batch(per_device_batch=8, world_size=1024, global_batch=4096)
    >>> q.grad_accum, q.global_batch, q.findings[0].code
    (1, 8192, 'accum-overshoot')
    """
    for label, value in (("per-device batch", per_device_batch), ("grad accum", grad_accum),
                         ("global batch", global_batch), ("seq len", seq_len),
                         ("max steps", max_steps), ("tensor parallel", tensor_parallel),
                         ("pipeline parallel", pipeline_parallel),
                         ("context parallel", context_parallel),
                         ("dies per device", dies_per_device)):
        if value is not None and value < 1:
            raise InputError(f"{label} must be at least 1, got {value}")
    world = _world_size(world_size, nodes, devices_per_node, dies_per_device)
    model_parallel = tensor_parallel * pipeline_parallel * context_parallel
    if world % model_parallel:
        raise InputError(f"world size {world} is not divisible by tensor × pipeline × context "
                         f"parallel = {model_parallel}; check --world-size and the parallel sizes")
    data_parallel = world // model_parallel
    findings: list[Finding] = []
    accum = grad_accum if grad_accum is not None else _accum_for(
        global_batch, per_device_batch, data_parallel, findings)
    total = per_device_batch * accum * data_parallel  # sequences per optimizer step
    if grad_accum is not None and global_batch is not None and global_batch != total:
        findings.append(Finding("warning", "batch-mismatch",
                                f"per-device batch {per_device_batch} × accumulation {accum} × "
                                f"data parallel {data_parallel} = {total}, not the target "
                                f"{global_batch}"))
    tokens_per_step = None if seq_len is None else total * seq_len  # tokens per optimizer step
    return BatchPlan(
        per_device_batch=per_device_batch, grad_accum=accum, world_size=world,
        data_parallel=data_parallel, global_batch=total, seq_len=seq_len,
        tokens_per_step=tokens_per_step, max_steps=max_steps,
        micro_steps=None if max_steps is None else max_steps * accum,
        total_samples=None if max_steps is None else max_steps * total,
        total_tokens=None if max_steps is None or tokens_per_step is None
        else max_steps * tokens_per_step,
        findings=Findings(findings))


def _world_size(world_size: int | None, nodes: int | None, devices_per_node: int | None,
                dies_per_device: int) -> int:
    if world_size is not None:
        if world_size < 1:
            raise InputError(f"world size must be at least 1, got {world_size}")
        return world_size
    if nodes is None or devices_per_node is None:
        raise MissingInfoError("the world size is unknown: pass --world-size N, or --nodes N "
                               "with --devices-per-node N")
    if nodes < 1 or devices_per_node < 1:
        raise InputError(f"nodes and devices per node must be at least 1, got {nodes} and "
                         f"{devices_per_node}")
    return nodes * devices_per_node * dies_per_device


def _accum_for(target: int | None, micro: int, data_parallel: int,
               findings: list[Finding]) -> int:
    """Accumulation that reaches ``target`` sequences per step: target // (micro × DP), ≥ 1."""
    if target is None:
        raise MissingInfoError("the accumulation is unknown: pass --grad-accum N, or a target "
                               "--global-batch N to compute it from")
    per_pass = micro * data_parallel  # sequences per micro-step across all replicas
    accum = max(target // per_pass, 1)
    reached = per_pass * accum
    if reached == target:
        return accum
    code = "accum-overshoot" if reached > target else "target-not-divisible"
    findings.append(Finding("warning", code,
                            f"target global batch {target} is not reachable with micro-batch "
                            f"{micro} × data parallel {data_parallel}: accumulation {accum} "
                            f"gives {reached}; {_suggest(target, micro, data_parallel)}"))
    return accum


def _suggest(target: int, micro: int, data_parallel: int) -> str:
    """The largest micro-batch ≤ ``micro`` that reaches ``target`` exactly, if one does."""
    if target % data_parallel:
        return (f"no micro-batch reaches it, as {target} is not a multiple of data parallel "
                f"{data_parallel}")
    per_device = target // data_parallel  # sequences per device per optimizer step
    best = max(m for m in range(1, min(micro, per_device) + 1) if per_device % m == 0)
    return (f"use micro-batch {best} with accumulation {per_device // best} to reach "
            f"{target} exactly")
