from __future__ import annotations

from rich.console import Console

from accelbench.devices.cpuinfo import parse_parallel_info
from accelbench.devices.doctor import doctor_report, python_warnings
from accelbench.render.doctor import render_doctor


def render(report: dict) -> str:
    console = Console(width=200, record=True)
    console.print(render_doctor(report))
    return console.export_text()


def test_rosetta_python_is_flagged() -> None:
    warnings = python_warnings({"pointer_bits": 64}, rosetta=True)
    assert len(warnings) == 1 and "Rosetta" in warnings[0] and "arm64" in warnings[0]
    assert python_warnings({"pointer_bits": 64}, rosetta=False) == []


def test_screen_shows_missing_devices_with_reason_and_fix() -> None:
    report = doctor_report()
    report["warnings"] = ["this Python is x86_64 running under Rosetta 2"]
    text = render(report)
    assert "cuda" in text and "missing" in text
    cuda = next(d for d in report["devices"] if d["kind"] == "cuda")
    assert cuda["reason"][:30] in text
    assert "warning: this Python is x86_64 running under Rosetta 2" in text
    assert f"torch uses {report['cpu']['torch_threads']} threads" in text


def test_parallel_info_parsing() -> None:
    text = """ATen/Parallel:
\tat::get_num_threads() : 8
\tat::get_num_interop_threads() : 4
OpenMP 201511 (a.k.a. OpenMP 4.5)
Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605
Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71)
ATen parallel backend: OpenMP
"""
    facts = parse_parallel_info(text)
    assert facts == {
        "parallel_backend": "OpenMP",
        "interop_threads": 4,
        "blas": "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605",
        "onednn": "Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71)",
    }
