"""Device names and memory: 'auto', 'cpu', 'cuda', 'cuda:N', 'mps'. Generic on purpose:
nothing here assumes a particular accelerator."""

from __future__ import annotations

import os

import torch

from .dtypes import DTYPE_NAMES

DTYPES = {name: getattr(torch, dtype) for name, dtype in DTYPE_NAMES.items()}


def available_devices() -> list[str]:
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def resolve_device(name: str | None = "auto") -> torch.device:
    """A torch.device for a user's choice, or ValueError saying what is available."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(
            f"unknown device {name!r}; available here: {', '.join(available_devices())}"
        ) from None
    if device.type == "cpu":
        return device
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {name!r} requested, but this PyTorch has no usable CUDA GPU "
                f"(available here: {', '.join(available_devices())})"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} does not exist; this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s)")
        return device
    if device.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ValueError(f"device 'mps' requested, but Apple's MPS is not available here "
                             f"(available: {', '.join(available_devices())})")
        return device
    raise ValueError(f"unsupported device {name!r}; use one of: auto, "
                     f"{', '.join(available_devices())}")


def resolve_dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    try:
        return DTYPES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; use float32, bfloat16 or float16") from None


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` computes in bfloat16 natively (a CPU with AVX512-BF16 or AMX, a
    GPU that supports it), where bfloat16 autocast makes matrix products faster; elsewhere
    it is emulated and slower, so float32 stays."""
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        checks = [getattr(torch.cpu, name, None)
                  for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
        return any(check() for check in checks if check is not None)
    return False


def free_memory_bytes(device: torch.device) -> int | None:
    """Memory available for new tensors on ``device`` (None when it cannot be told)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type in ("cpu", "mps"):  # MPS uses unified memory
        try:
            with open("/proc/meminfo", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


GIB = 1024 ** 3


def check_memory(need_bytes: int, device: torch.device, what: str) -> None:
    """Refuse, with a clear message, work that will not fit in the device's memory."""
    free = free_memory_bytes(device)
    if free is not None and need_bytes > free:
        raise MemoryError(f"{what} needs about {need_bytes / GIB:.1f} GiB on {device}, but only "
                          f"{free / GIB:.1f} GiB is available; choose a smaller model, "
                          "bfloat16, or another device")


