"""Property tests of the command line's number parsing: a value is accepted only when valid."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.bounds import MOST_COUNT, MOST_SECONDS, check_number
from accelbench.cli import main
from accelbench.cli.common import non_negative_float, non_negative_int, positive_float, positive_int
from accelbench.cli.optiongroups import number, whole_number
from accelbench.errors import UsageError

PARSERS = [(positive_int, int, 1), (non_negative_int, int, 0), (positive_float, float, 1e-300),
           (non_negative_float, float, 0.0)]


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=12) | st.integers().map(str) | st.floats().map(str))
@pytest.mark.parametrize("parse,kind,lowest", PARSERS)
def test_parsers_accept_only_valid_numbers(parse, kind, lowest, text: str) -> None:
    try:
        value = parse(text)
    except argparse.ArgumentTypeError as error:
        assert "\n" not in str(error) and (repr(text.strip()) in str(error) or repr(text) in str(error))
        return
    assert isinstance(value, kind) and math.isfinite(value)
    assert value >= lowest if lowest == 0 else value > 0
    assert value <= 1e9 if kind is int else value <= 1e7


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=12) | st.integers().map(str) | st.floats().map(str))
@pytest.mark.parametrize("parse,whole,zero_ok", [(whole_number, True, False),
                                                 (whole_number, True, True),
                                                 (number, False, False), (number, False, True)])
def test_shared_options_accept_only_valid_numbers(parse, whole: bool, zero_ok: bool,
                                                  text: str) -> None:
    """The shared run options parse the syntax, then RunOptions' check_number judges the value."""
    most = MOST_COUNT if whole else MOST_SECONDS
    try:
        value = parse(text)
        check_number("--option", value, whole=whole, zero_ok=zero_ok, most=most)
    except (argparse.ArgumentTypeError, UsageError) as error:
        assert "\n" not in str(error)
        return
    assert isinstance(value, int if whole else float) and math.isfinite(value)
    assert (value >= 0 if zero_ok else value > 0) and value <= most


@pytest.mark.parametrize("text", ["0", "-1", "abc", "1.5", "nan", "inf", "1e12", "", " ", "0x10"])
@pytest.mark.parametrize("option", ["--steps", "--batch-size", "--threads", "--epochs"])
def test_run_rejects_bad_whole_numbers_with_exit_2(option: str, text: str, capsys) -> None:
    # A bad syntax stops argparse (SystemExit); a bad value, the shared option check (UsageError)
    try:
        code = main(["run", "mnist", option, text])
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and option in err and "Traceback" not in err
