"""Property tests of the command line's number parsing: a value is accepted only when valid."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.cli import main
from accelbench.cli.common import non_negative_float, non_negative_int, positive_float, positive_int

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


@pytest.mark.parametrize("text", ["0", "-1", "abc", "1.5", "nan", "inf", "1e12", "", " ", "0x10"])
@pytest.mark.parametrize("option", ["--steps", "--batch-size", "--threads", "--epochs"])
def test_run_rejects_bad_whole_numbers_with_exit_2(option: str, text: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "mnist", option, text])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and option in err and "Traceback" not in err
