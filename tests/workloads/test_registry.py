"""The workload registry (a torch-free leaf of names) and the catalogue that resolves them."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.errors import UsageError
from accelbench.workloads import catalogue, registry

WORKLOADS_DIR = Path(catalogue.__file__).parent / "builtin"


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_builtin_names_are_what_their_modules_register() -> None:
    """The names are data so that options can be checked without torch; the data must not drift
    from the modules (a module left out would never be imported, its workload never found)."""
    for name, module in registry.BUILTIN.items():
        importlib.import_module(module)
        registered = registry.registered().get(name)
        assert registered is not None and registered.__module__ == module, name
    registering = {f"accelbench.workloads.builtin.{path.stem}" for path in WORKLOADS_DIR.glob("*.py")
                   if "\n@register\n" in path.read_text()}
    assert registering == set(registry.BUILTIN.values())
    assert registry.builtin_names() == sorted(registry.BUILTIN)


def test_every_prefix_has_an_adapter() -> None:
    for prefix, module in registry.PREFIXES.items():
        adapter = importlib.import_module(module)
        assert callable(adapter.resolve) and callable(adapter.list_names), prefix


def test_names_are_listed_and_checked_without_torch_or_any_workload() -> None:
    code = ("import sys\n"
            "from accelbench.errors import UsageError\n"
            "from accelbench.workloads import registry\n"
            "assert 'mnist' in registry.builtin_names()\n"
            "assert registry.is_model_name('timm:resnet18') and not registry.is_model_name('foo:x')\n"
            "assert registry.split_model_name('hf:org/name') == ('hf', 'org/name')\n"
            "try:\n"
            "    registry.split_model_name('timm:')\n"
            "except UsageError as error:\n"
            "    print(error)\n"
            "print(sorted(m for m in sys.modules if m.startswith('accelbench')), 'torch' in sys.modules)\n")
    refused, loaded = _run(code).splitlines()
    assert refused == "'timm:' names no model; write e.g. timm:NAME"
    assert loaded == ("['accelbench', 'accelbench.errors', 'accelbench.workloads', "
                      "'accelbench.workloads.presets', 'accelbench.workloads.registry'] False")


def test_a_builtin_name_imports_only_its_own_module() -> None:
    code = ("import sys\n"
            "from accelbench.workloads.catalogue import get_workload_class\n"
            "assert get_workload_class('mnist').name == 'mnist'\n"
            "print(sorted(m.split('.', 2)[2] for m in sys.modules\n"
            "             if m.startswith('accelbench.workloads.')))\n")
    assert _run(code) == ("['base', 'builtin', 'builtin.mnist', 'catalogue', 'presets', 'registry', "
                          "'userfile']")


def test_unknown_and_malformed_names_are_one_line_usage_errors() -> None:
    # Earlier tests may have registered more names (a bench: object, a file's workload): "(.*, )?".
    with pytest.raises(UsageError, match=r"^unknown workload 'nope'; known: (.*, )?bert-base, .*mnist"
                                         r".*; or a model name: timm:NAME, torchvision:NAME, "
                                         r"hf:TYPE, hf:ORG/NAME$"):
        catalogue.get_workload_class("nope")
    with pytest.raises(UsageError, match=r"^'torchvision:' names no model; write e.g. torchvision:NAME$"):
        catalogue.match_workloads(["torchvision:"])
    assert catalogue.match_workloads(["mnist", "mn*", "vae"]) == ["mnist", "vae"]


def test_a_workload_file_cannot_take_a_builtin_name(tmp_path: Path) -> None:
    """Built-ins load one module at a time, so a file's class under a built-in's name was the
    workload until something listed every name, and the built-in after that: a parent that listed
    names and its worker processes, which do not, ran different models under one name."""
    path = tmp_path / "clash.py"
    path.write_text("import torch\n"
                    "import accelbench\n\n"
                    "@accelbench.register\n"
                    "class Mine(accelbench.Workload):\n"
                    "    name = 'mnist'\n"
                    "    modes = ('eval',)\n"
                    "    default_batch_size = dataset_size = {'eval': 2}\n"
                    "    def build_model(self): return torch.nn.Linear(2, 2)\n"
                    "    def make_batches(self, mode, batch_size, options): return [(torch.zeros(2, 2),)]\n"
                    "    def eval_step(self, model, batch): return model(batch[0]).sum()\n")
    with pytest.raises(UsageError, match=r"clash\.py \(line \d+\): workload class Mine takes the name "
                                         r"'mnist' of a built-in workload; choose another name$"):
        catalogue.load_workload_file(path)
    assert catalogue.get_workload_class("mnist").__module__ == "accelbench.workloads.builtin.mnist"
