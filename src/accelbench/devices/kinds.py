"""The device kinds and how ``--device`` is written, as torch-free data (option parsing reads
them without importing torch)."""

from __future__ import annotations

#: Accelerators in the order ``auto`` prefers them.
KNOWN_KINDS = ("cuda", "xpu", "mps")
DEVICE_HELP = "cpu, cuda, cuda:N, mps, xpu, any torch.accelerator type, auto, all, or a comma list"
#: What people call a device kind, for "did you mean" (ROCm GPUs are torch's cuda kind).
DEVICE_ALIASES = {"gpu": ("cuda", "mps", "xpu"), "nvidia": ("cuda",), "amd": ("cuda",),
                  "rocm": ("cuda",), "hip": ("cuda",), "apple": ("mps",), "metal": ("mps",),
                  "intel": ("xpu",)}
