"""Where tensors live: the `device` setting ("auto", "cpu" or "cuda") and its one validation.

TrainConfig.device is the single place a training run names its device; the CLI and the Train page pass
that value through. Models in bundles, snapshots, probes and checkpoints are always on the CPU: only a
Trainer's working copy of the model (and its batches) lives on the device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    import torch

DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    """True when torch can use a CUDA GPU here (False on CPU-only torch builds and machines without one)."""
    import torch  # function-local: a server's first page reads DEVICES without torch

    return torch.cuda.is_available()


def resolve_device(name: str) -> torch.device:
    """The torch device the setting `name` means: "auto" is CUDA when available, else the CPU.

    ValueError for anything but the three names, and for "cuda" on a machine where CUDA is not available
    (the message names that, so "cuda" is never silently trained on the CPU)."""
    if not isinstance(name, str) or name not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {name!r}")
    if name == "cuda" and not cuda_available():
        raise ValueError(
            "device 'cuda' was asked for, but torch.cuda.is_available() is False here (no CUDA GPU, or a "
            "CPU-only torch build); use 'auto' or 'cpu'"
        )
    import torch  # function-local: a server's first page reads DEVICES without torch

    if name == "auto":
        return torch.device("cuda" if cuda_available() else "cpu")
    return torch.device(name)
