"""Issue 27, "The loop owns its stop rule": one workload-name matcher.

``run``'s names (``options/values.select_workloads``) and the catalogue's ``match_workloads``
(behind ``accelbench.list_workloads`` and ``list``) each had their own loop over the patterns, and
the registry and the catalogue each their own wildcard match. They disagreed: a registered name
that holds a wildcard character (``bench()`` names its model objects; a workload file may choose
``odd[1]``) was taken as it is by ``run`` but read as a wildcard by the catalogue, which then
refused it. Now ``registry.match`` is the one loop and ``registry.matching`` the one wildcard rule.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accelbench.api import list_workloads
from accelbench.options.values import select_workloads
from accelbench.workloads import catalogue, registry


class _Odd:
    name = "odd[1]"


def _run_names(patterns: list[str]) -> list[str]:
    return list(select_workloads(patterns, None, [])[0])


CHOOSERS: dict[str, Callable[[list[str]], list[str]]] = {
    "run": _run_names,
    "catalogue": catalogue.match_workloads,
    "api": lambda patterns: list_workloads(*patterns),
}


@pytest.fixture
def odd_name(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(registry._CLASSES, _Odd.name, _Odd)
    return _Odd.name


@pytest.mark.parametrize("chooser", sorted(CHOOSERS))
def test_every_path_takes_a_registered_name_as_it_stands(chooser: str, odd_name: str) -> None:
    assert CHOOSERS[chooser]([odd_name]) == [odd_name]


@pytest.mark.parametrize("chooser", sorted(CHOOSERS))
def test_every_path_matches_wildcards_alike(chooser: str, odd_name: str) -> None:
    assert CHOOSERS[chooser](["v*", "mnist", "odd*", "vae", "mn?st"]) == [
        "vae", "vgg16", "mnist", odd_name]


def test_the_one_wildcard_rule() -> None:
    names = ["resnet18", "resnet50", "ResNet18", "vit"]
    assert registry.matching("resnet*", names) == ["resnet18", "resnet50"]  # case matters
    assert registry.matching("resnet[15]?", names) == ["resnet18", "resnet50"]
    assert registry.matching("vit", names) == ["vit"]
    assert registry.is_wildcard("resnet?") and not registry.is_wildcard("resnet18")
