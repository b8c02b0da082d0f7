"""Issue 30 (item D): a mistyped workload, device or flag gets a "did you mean"; an unknown flag's
message names the subcommand's own help; ``compare BUNDLE`` suggests ``--against``; ``--against``
takes one SOURCE per use, so the names typed after it stay names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest_report import assert_one_line_error, case, record

from accelbench.cli import build_parser
from accelbench.errors import did_you_mean


def test_the_closest_names_and_the_aliases_are_suggested() -> None:
    assert did_you_mean("mnsit", ["mnist", "vae", "gpt2"]) == " (did you mean 'mnist'?)"
    assert did_you_mean("gpu", ["cpu", "cuda"], {"gpu": ("cuda", "mps", "xpu")}) == \
        " (did you mean 'cuda', 'mps' or 'xpu'?)"
    assert did_you_mean("zzzz", ["mnist"]) == ""


def test_a_mistyped_workload_is_named_with_its_likely_name(inline_cli) -> None:
    assert_one_line_error(inline_cli("run", "mnsit"), "unknown workload 'mnsit'",
                          "did you mean 'mnist'?")
    assert_one_line_error(inline_cli("list", "vea"), "did you mean 'vae'?")


def test_gpu_is_not_a_device_kind_and_the_kinds_it_means_are_suggested(inline_cli) -> None:
    assert_one_line_error(inline_cli("run", "mnist", "--device", "gpu"), "unknown device 'gpu'",
                          "did you mean 'cuda', 'mps' or 'xpu'?")
    assert_one_line_error(inline_cli("run", "mnist", "--device", "cdua:1"), "did you mean 'cuda'?")


@pytest.mark.parametrize(("args", "flag", "helps"), [
    (["run", "mnist", "--dvice", "cpu"], "--device", "accelbench run --help"),
    (["compare", "a.json", "--refrence"], "--reference", "accelbench compare --help"),
    (["sweep", "mnist", "--batch-sise", "1,2"], "--batch-size", "accelbench sweep --help"),
    (["hub", "compact", "x", "-o", "y", "--wrkers", "2"], "--workers", "accelbench hub compact --help"),
])
def test_an_unknown_flag_names_the_commands_own_help_and_the_flag_meant(
        inline_cli, args: list[str], flag: str, helps: str) -> None:
    assert_one_line_error(inline_cli(*args), "unrecognized arguments", f"did you mean '{flag}'?",
                          f"see '{helps}'")


def test_against_takes_one_source_and_the_workload_after_it_stays_a_workload() -> None:
    argv = ["run", "--against", "b.jsonl", "mnist"]
    args = build_parser(argv).parse_args(argv)
    assert args.against == ["b.jsonl"] and args.workloads == ["mnist"]
    argv = ["compare", "r.json", "s.json", "--against", "a.jsonl", "--against", "shards/"]
    args = build_parser(argv).parse_args(argv)
    assert args.against == ["a.jsonl", "shards/"] and args.runs == ["r.json", "s.json"]


def test_a_second_source_after_one_against_is_said_to_need_its_own(inline_cli) -> None:
    assert_one_line_error(inline_cli("run", "mnist", "--against", "a.jsonl", "b.jsonl"),
                          "each --against takes one source: --against b.jsonl")
    assert_one_line_error(inline_cli("run", "--against", "a.jsonl", "b.jsonl"),
                          "'b.jsonl' is a source of shared results", "--against b.jsonl")


def test_compare_on_a_bundle_suggests_against(inline_cli, tmp_path: Path) -> None:
    bundle = tmp_path / "a.jsonl"
    bundle.write_text(json.dumps({"machine_id": "0" * 16}) + "\n")
    assert_one_line_error(inline_cli("compare", str(bundle)), "is a source of shared results, not a run",
                          f"--against {bundle}")
    folder = tmp_path / "bundles"
    folder.mkdir()
    (folder / "x.jsonl").write_text("")
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(record("mine0001", [case()]).to_dict()))
    assert_one_line_error(inline_cli("compare", str(mine), str(folder)), f"--against {folder}")


# Issue 36: every name a user types gets a "did you mean", one line, exit 2, in a real process.
MISTYPED = [
    (["rnu"], "invalid choice: 'rnu' (did you mean 'run'?)", "see 'accelbench --help'"),
    (["hub", "compat", "x", "-o", "y"], "invalid choice: 'compat' (did you mean 'compact'?)",
     "see 'accelbench hub --help'"),
    (["run", "nanogpt-char", "--mode", "generate", "--protocol", "llama"],
     "--protocol 'llama' is unknown (did you mean 'llama-bench'?)"),
    (["run", "mnist", "--mode", "generat"], "--mode 'generat' is not allowed (did you mean 'generate'?)"),
    (["check", "mnist", "--mode", "generat"], "invalid choice: 'generat' (did you mean 'generate'?)"),
    (["export", "abc", "--format", "md"], "invalid choice: 'md' (did you mean 'markdown'?)"),
    (["run", "mnist", "--isolation", "proces"], "--isolation 'proces' is unknown (did you mean "
     "'process'?)"),
    (["export", "abc", "--format", "zzz"], "(choose from 'json', 'csv', 'markdown', 'hud')"),
]


def test_mistyped_commands_verbs_protocols_modes_and_formats_are_suggested(cli) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda case: cli(*case[0]), MISTYPED))
    for (_, *needles), result in zip(MISTYPED, done, strict=True):
        assert_one_line_error(result, *needles)


def test_a_prompt_that_does_not_fit_names_the_workload_once(inline_cli) -> None:
    """No stutter: the message once read "do not fit 'nanogpt-char''s context"."""
    result = inline_cli("run", "nanogpt-char", "--size", "tiny", "--mode", "generate",
                        "--prompt-len", "40")
    assert_one_line_error(result, "do not fit the 32-token context of 'nanogpt-char'")
    assert "''" not in result.stderr
