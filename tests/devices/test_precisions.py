"""The precision table: plain data that options validate without torch, and the torch side built
from it."""

from __future__ import annotations

import subprocess
import sys

import torch

from accelbench.devices.numerics import PRECISIONS, get_precision
from accelbench.devices.precisions import PRECISION_NAMES, PRECISION_SPECS

_VALIDATE_WITHOUT_TORCH = """
import sys
from accelbench.errors import UsageError
from accelbench.options import RunOptions
RunOptions(workloads=("mnist",), precisions=("bf16", "amp-fp16"))
try:
    RunOptions(workloads=("mnist",), precisions=("fp64x",))
except UsageError as error:
    print(error)
print(f"torch={'torch' in sys.modules}")
"""


def test_precisions_are_validated_without_importing_torch() -> None:
    # Real interpreter: importing torch costs seconds that a typo must not wait for.
    done = subprocess.run([sys.executable, "-c", _VALIDATE_WITHOUT_TORCH], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    error, imported = done.stdout.strip().splitlines()
    assert error == f"unknown precision 'fp64x'; allowed: {', '.join(PRECISION_NAMES)}"
    assert imported == "torch=False"


def test_the_torch_side_follows_the_table() -> None:
    assert tuple(PRECISIONS) == PRECISION_NAMES
    for name, spec in PRECISION_SPECS.items():
        precision = get_precision(name)
        assert precision.param_dtype == getattr(torch, spec.param_dtype)
        autocast = getattr(torch, spec.autocast_dtype) if spec.autocast_dtype else None
        assert precision.autocast_dtype == autocast
        assert (precision.grad_scaler, precision.matmul) == (spec.grad_scaler, spec.matmul)
    assert get_precision("tf32").tf32 and not get_precision("fp32").tf32
    assert get_precision("amp-fp16").grad_scaler and get_precision("bf16").param_dtype == torch.bfloat16


def test_the_cli_lists_the_table() -> None:
    import argparse

    from accelbench.cli.optiongroups import add_config_arguments

    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    help_text = " ".join(parser.format_help().split())
    assert ", ".join(PRECISION_NAMES) in help_text
