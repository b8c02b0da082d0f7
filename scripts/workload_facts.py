"""Count the built-in workloads' facts (parameters, FLOPs per sample, sizes) and write them where
accelbench ships them (src/accelbench/workloads/builtin/facts.json), with the stamp they were
counted under: accelbench's version, torch's, torchvision's and transformers', and a digest of the
workloads package's sources. A first ``accelbench list`` reads them where the stamp matches the
installation, instead of building every model. tests/cli/test_list_cli.py fails when the workloads'
code changed since they were written: run this script again (in the test environment)."""

from __future__ import annotations

import json

from accelbench.workloads import facts_cache
from accelbench.workloads.facts import model_facts
from accelbench.workloads.registry import builtin_names


def main() -> None:
    facts = {name: model_facts(name).to_dict() for name in builtin_names()}
    data = {"stamp": facts_cache.stamp(), "facts": {"published": facts}}
    facts_cache.SHIPPED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(facts)} workloads' facts written to {facts_cache.SHIPPED}, stamp {data['stamp']}")


if __name__ == "__main__":
    main()
