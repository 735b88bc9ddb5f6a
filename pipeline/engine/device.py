"""The device a cell trains on, what a seed records of it, and what running out of its memory
looks like. Torch is imported only when a question needs it, so that the check stage can name
the device without loading it."""
from __future__ import annotations

from pipeline import config


def resolve_device_name(name: str) -> str:
    """``auto``/``cpu``/``cuda`` -> the device training will use; ``cuda`` without one is an error.
    On a cluster each worker answers for itself (``auto``: its GPU where it has one)."""
    if name == "cpu":
        return "cpu"
    import torch  # only for the question whether CUDA is there

    if torch.cuda.is_available():
        return "cuda"
    if name == "cuda":
        raise config.ConfigError("device: 'cuda' asked for but no CUDA device is available; "
                                 "allowed values here: auto, cpu")
    return "cpu"


def device_label(device) -> str:
    """``cpu`` or ``cuda (NVIDIA H200)``: stored with each seed, since its timings are that device's."""
    import torch

    device = torch.device(device)
    return f"cuda ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "cpu"


# What torch's CPU allocator says when the OS refuses it: "can't allocate memory" (torch 2.13's
# DefaultCPUAllocator), "not enough memory" (older releases); CUDA raises OutOfMemoryError.
CPU_ALLOCATOR_REFUSALS = ("can't allocate memory", "not enough memory")


def is_out_of_memory(err: BaseException) -> bool:
    import torch

    return isinstance(err, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(err, RuntimeError) and any(w in str(err) for w in CPU_ALLOCATOR_REFUSALS))
