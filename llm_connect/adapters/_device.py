"""Where a local embedding model runs: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

:func:`check_device` validates a device string (a bad one is a
:class:`~llm_connect.errors.ConfigurationError` listing the valid forms);
:func:`resolve_device` turns it into the device that will run: ``auto`` is a CUDA or MPS device
when PyTorch sees one, else the CPU; ``cuda[:N]`` and ``mps`` must be seen by PyTorch, or it is a
``ConfigurationError`` naming the device and what was found.

``torch`` is imported only when the answer needs it: never for ``cpu``, and for ``auto`` only
where a GPU could be there at all (an NVIDIA or AMD driver's device files, or Apple silicon), so
that a machine without one resolves ``auto`` to the CPU without loading PyTorch.
"""

from __future__ import annotations

import os
import platform
import re
import sys

from llm_connect.errors import ConfigurationError

__all__ = ["DEVICE_FORMS", "check_device", "device_kind", "gpu_may_be_present", "resolve_device"]

DEVICE_FORMS = "auto, cpu, cuda, cuda:N (N a GPU index) or mps"
"""The device strings a user may give (for error messages and help texts)."""
_DEVICE = re.compile(r"auto|cpu|mps|cuda(?::\d+)?")
_GPU_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")
"""Files an NVIDIA (CUDA) or AMD (ROCm, seen by PyTorch as ``cuda``) driver creates on Linux."""


def check_device(device: object) -> str:
    """``device`` stripped and lower-cased when it is a valid device string.

    Raises:
        ConfigurationError: anything else, listing the valid forms.
    """
    text = device.strip().lower() if isinstance(device, str) else None
    if text is None or not _DEVICE.fullmatch(text):
        raise ConfigurationError(f"embedding device {device!r} is not one of {DEVICE_FORMS}")
    return text


def device_kind(device: str) -> str:
    """``cuda`` for ``cuda:N``; the device itself otherwise."""
    return device.partition(":")[0]


def gpu_may_be_present() -> bool:
    """Whether this machine may have a GPU PyTorch can use (checked without importing torch):
    Apple silicon, or on Linux/Windows a GPU driver's files (Windows: assumed present)."""
    if sys.platform == "darwin":
        return platform.machine() == "arm64"
    if sys.platform.startswith("win"):
        return True
    return any(os.path.exists(path) for path in _GPU_FILES)


def _torch_sees() -> tuple[int, bool, str] | None:
    """``(CUDA devices, an MPS device, what PyTorch sees in words)``; ``None`` without torch."""
    try:
        import torch
    except ImportError:
        return None
    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    seen = f"{cuda} CUDA device(s)" if cuda else "no CUDA device"
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        seen += " (this PyTorch build has no CUDA)"
    seen += " and an MPS device" if mps else " and no MPS device"
    return cuda, mps, f"PyTorch {torch.__version__} sees {seen}"


def resolve_device(device: str) -> str:
    """The device that runs for ``device`` (see :func:`check_device`): ``cpu`` as given,
    ``auto`` as ``cuda`` (PyTorch sees a CUDA device), else ``mps`` (it sees one), else ``cpu``;
    ``cuda``, ``cuda:N`` and ``mps`` as given when PyTorch sees them.

    Raises:
        ConfigurationError: an invalid device string; a ``cuda``/``cuda:N``/``mps`` device
            PyTorch does not see (naming the device and what PyTorch found).
    """
    device = check_device(device)
    if device == "cpu" or (device == "auto" and not gpu_may_be_present()):
        return "cpu"
    sees = _torch_sees()
    if sees is None:
        if device == "auto":
            return "cpu"
        raise ConfigurationError(f"embedding device {device!r} needs PyTorch, which is not installed")
    cuda, mps, found = sees
    if device == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if (device == "mps" and mps) or (device != "mps" and cuda > int(device.partition(":")[2] or 0)):
        return device
    raise ConfigurationError(
        f"embedding device {device!r} is not available: {found}; use device=auto or device=cpu"
    )
