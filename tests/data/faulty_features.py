"""Probe features that fail on purpose, loaded with ``probe --feature-file`` by the driver tests."""

from __future__ import annotations

import os
import signal

from accelbench.probes import Feature, Trial, register_feature


def _segfault(device: str) -> Trial:
    os.kill(os.getpid(), signal.SIGSEGV)
    return Trial()


def _fine(device: str) -> Trial:
    return Trial(notes=["ran after the crash"])


register_feature(Feature("fault_segv", "dies from SIGSEGV", _segfault, timed=False))
register_feature(Feature("after_crash", "works, probed after fault_segv", _fine, timed=False))
