"""The doctor's one screen."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from accelbench.measure.trackers.memory import format_bytes
from accelbench.render.fit import FittedTable, Prose

_SKIP = {"device", "name", "memory_total_bytes", "memory_free_bytes"}


def _device_details(instance: dict[str, Any]) -> str:
    parts = [str(instance.get("name", ""))]
    total = instance.get("memory_total_bytes")
    if total:
        memory = f"memory {format_bytes(total)}"
        if instance.get("memory_free_bytes") is not None:
            memory += f" ({format_bytes(instance['memory_free_bytes'])} free)"
        parts.append(memory)
    if instance.get("device") == "cpu":
        return ", ".join(parts)  # the CPU's facts have their own lines above the table
    for key, value in instance.items():
        if key not in _SKIP and value not in (None, "") and not key.endswith("_bytes"):
            parts.append(f"{key.replace('_', ' ')} {value}")
    return ", ".join(p for p in parts if p)


def render_doctor(report: dict[str, Any], devices_only: bool = False) -> Group:
    """The machine's facts, the devices table, the best device and the warnings (``devices_only``:
    the table, the best device and the warnings)."""
    python, torch_facts, cpu = report["python"], report["torch"], report["cpu"]
    lines = [
        Text.assemble(("Python ", "bold"), f"{python['version']} ({python['implementation']}, "
                      f"{python['architecture']}, {python['pointer_bits']}-bit)"),
        Text.assemble(("torch ", "bold"), f"{torch_facts['version']}: CUDA build "
                      f"{torch_facts['cuda_build'] or 'none'}, ROCm build "
                      f"{torch_facts['hip_build'] or 'none'}, cuDNN {torch_facts['cudnn'] or 'none'}"
                      f", MPS built {'yes' if torch_facts['mps_built'] else 'no'}, XPU built "
                      f"{'yes' if torch_facts['xpu_built'] else 'no'}"),
        Text.assemble(("CPU ", "bold"), f"{cpu.get('name')}: {cpu.get('physical_cores')} physical"
                      f" / {cpu.get('logical_cores')} logical cores, torch uses "
                      f"{cpu.get('torch_threads')} threads ({cpu.get('parallel_backend', '?')}), "
                      f"RAM {format_bytes(cpu.get('memory_total_bytes'))}"),
        Text.assemble(("    BLAS ", "dim"), str(cpu.get("blas", "unknown")),
                      ("  oneDNN ", "dim"), str(cpu.get("onednn", "not built"))),
    ]
    if "macos" in report:
        mac = report["macos"]
        lines.append(Text.assemble(("macOS ", "bold"), f"{mac['version']} on {mac['machine']}"
                                   f"{' (under Rosetta)' if mac['rosetta'] else ''}"))
    rows: list[list[str | Text]] = []
    for entry in report["devices"]:
        if entry["available"]:
            rows += [[instance["device"], Text("available", style="green"),
                      _device_details(instance), ""] for instance in entry.get("instances", [])]
        else:
            rows.append([entry["kind"], Text("missing", style="red"), entry["reason"], entry["fix"]])
    table = FittedTable("Devices", ("kind", "status", "details / reason", "fix"), rows,
                        stack=("kind",))
    parts: list[Any] = [*([] if devices_only else (Prose(line) for line in lines)), table,
                        Text.assemble(("Best device: ", "bold"), report["best_device"])]
    parts.extend(Prose(f"warning: {w}", "yellow") for w in report["warnings"])
    return Group(*parts)
