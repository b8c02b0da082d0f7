"""``accelbench list``: every workload with its facts, as JSON from a real process and as a table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from accelbench.cli import main
from accelbench.workloads import get_workload_class, workload_names
from accelbench.workloads.facts import clear_facts_cache

FIELDS = {"name", "description", "source", "parameters", "forward_flops_per_sample", "flops_per_sample",
          "torchvision", "default_batch_size", "input_shape", "dataset_size", "modes", "available",
          "unavailable_reason"}


def test_list_json_from_a_real_process(cli) -> None:
    proc = cli("list", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = {item["name"]: item for item in json.loads(proc.stdout)}
    # other tests may register user workloads in this process; the subprocess has the built-ins
    builtin = {n for n in workload_names() if get_workload_class(n).__module__.startswith("accelbench.")}
    assert set(listed) == builtin and len(builtin) >= 7
    for item in listed.values():
        assert set(item) >= FIELDS, item["name"]
        assert item["available"] is (item["unavailable_reason"] is None)
    resnet = listed["resnet50"]
    assert resnet["parameters"] == 25_557_032
    assert resnet["torchvision"]["gmacs"] == pytest.approx(4.09, abs=0.005)
    assert resnet["torchvision"]["label"] == "torchvision published (multiply-adds)"
    assert resnet["forward_flops_per_sample"] == pytest.approx(2 * 4.09e9, rel=0.05)
    assert resnet["default_batch_size"] == {"train": 128, "eval": 128}
    assert resnet["input_shape"] == [3, 224, 224]
    assert resnet["dataset_size"] == {"train": 1_281_167, "eval": 50_000}
    assert resnet["modes"] == ["train", "eval"]
    assert listed["gpt2"]["modes"] == ["train", "eval", "generate"]
    assert listed["vgg16"]["parameters"] == 138_357_544
    assert listed["vae"]["flops_per_sample"]["train"] > listed["vae"]["flops_per_sample"]["eval"] > 0


def test_list_table_with_a_wildcard(capsys) -> None:
    assert main(["list", "resnet*", "vgg16"]) == 0
    out = capsys.readouterr().out
    assert "resnet50" in out and "vgg16" in out and "simclr" not in out
    assert "25.6M" in out and "138M" in out  # parameters
    assert "4.09" in out and "15.47" in out  # torchvision's GMACs
    assert "8.18G" in out and "30.9G" in out  # counted forward FLOPs


def test_list_unknown_pattern_is_a_usage_error(capsys) -> None:
    assert main(["list", "nosuch*"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("accelbench: error: unknown workload 'nosuch*'") and len(err.splitlines()) == 1


def test_list_shows_the_install_command_when_transformers_is_missing(monkeypatch, capsys, tmp_path) -> None:
    from accelbench.workloads import facts_cache

    clear_facts_cache()  # facts are cached per process; these must see the missing package
    # Really missing, transformers has no installed version, so the stamp matches no stored facts
    # ("not installed"); here it is only hidden from import, so the stored facts are set aside.
    monkeypatch.setattr(facts_cache, "SHIPPED", tmp_path / "none.json")
    assert facts_cache._version("no-such-package-here") == "not installed"
    monkeypatch.setitem(sys.modules, "transformers", None)
    try:
        assert main(["list", "bert-base"]) == 0
    finally:
        clear_facts_cache()
    text = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "bert-base (missing)" in text
    assert "install it with: pip install 'accelbench[transformers]'" in text


def test_a_second_list_reads_the_cache_and_starts_no_torch(cli, accelbench_home) -> None:
    """Issue 30: list took 19 s (it builds every model to count FLOPs). The facts are kept with the
    versions that counted them; a warm list answers from them without importing torch."""
    first = cli("list")
    assert first.returncode == 0, first.stderr
    cache = json.loads((accelbench_home / "facts-cache.json").read_text())
    assert cache["stamp"]["torch"] and "resnet50" in cache["facts"]["published"]
    second = _torch_free_list(accelbench_home)
    assert second.returncode == 0, second.stderr
    assert second.stderr.strip().endswith("NO-TORCH") and second.stdout == first.stdout


def test_the_cache_is_counted_again_when_what_it_depends_on_changes(accelbench_home, tmp_path,
                                                                    monkeypatch) -> None:
    from accelbench.workloads import facts_cache
    from accelbench.workloads.facts import model_facts

    monkeypatch.setattr(facts_cache, "SHIPPED", tmp_path / "none.json")  # the data folder's alone

    facts = [model_facts("mnist")]
    facts_cache.store(facts)
    assert facts_cache.load(["mnist"]) == facts
    assert facts_cache.load(["mnist", "vae"]) is None  # not all there: count
    data = json.loads(facts_cache.cache_path().read_text())
    data["stamp"]["torch"] = "0.0.1"
    facts_cache.cache_path().write_text(json.dumps(data))
    assert facts_cache.load(["mnist"]) is None
    facts_cache.cache_path().write_text("{not json")
    assert facts_cache.load(["mnist"]) is None


def _torch_free_list(home) -> subprocess.CompletedProcess[str]:
    probe = ("import sys, runpy; sys.argv = ['accelbench', 'list']\n"
             "try:\n    runpy.run_module('accelbench', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)")
    env = {**os.environ, "ACCELBENCH_HOME": str(home), "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                          timeout=120)


def _shipped() -> dict:
    from accelbench.workloads import facts_cache

    return json.loads(facts_cache.SHIPPED.read_text(encoding="utf-8"))


def _same_libraries(shipped: dict) -> bool:
    from accelbench.workloads import facts_cache

    current = facts_cache.stamp()
    return all(shipped["stamp"][name] == current[name] for name in facts_cache.LIBRARIES)


def test_the_shipped_facts_are_this_codes_and_what_counting_gives() -> None:
    """The facts accelbench ships (workloads/builtin/facts.json) stand for this code: a change to
    the workloads package without running scripts/workload_facts.py fails here; and with the
    libraries they were counted with, counting gives the same facts."""
    from accelbench import __version__
    from accelbench.workloads import facts_cache
    from accelbench.workloads.facts import model_facts
    from accelbench.workloads.registry import builtin_names

    shipped = _shipped()
    assert shipped["stamp"]["workloads_code"] == facts_cache.stamp()["workloads_code"], (
        "the workloads' code changed since the shipped facts were counted: run "
        "scripts/workload_facts.py")
    assert shipped["stamp"]["accelbench"] == __version__
    assert sorted(shipped["facts"]["published"]) == builtin_names()
    if not _same_libraries(shipped):
        pytest.skip(f"the shipped facts were counted with {shipped['stamp']}, not these libraries")
    clear_facts_cache()
    for name in builtin_names():
        counted = json.loads(json.dumps(model_facts(name).to_dict()))
        assert counted == shipped["facts"]["published"][name], name


def test_a_first_list_reads_the_shipped_facts_and_starts_no_torch(accelbench_home) -> None:
    """Issue 30: a newcomer's first list counted every model (8 s here, 19 s before the cache):
    where the installation is the one the shipped facts were counted with, it reads them."""
    if not _same_libraries(_shipped()):
        pytest.skip("the shipped facts were counted with other library versions")
    first = _torch_free_list(accelbench_home)
    assert first.returncode == 0, first.stderr
    assert first.stderr.strip().endswith("NO-TORCH") and "resnet50" in first.stdout
    assert "25.6M" in first.stdout and "8.18G" in first.stdout
    kept = json.loads((accelbench_home / "facts-cache.json").read_text())  # kept in the data folder
    assert kept["facts"]["published"]["resnet50"]["parameters"] == 25_557_032
