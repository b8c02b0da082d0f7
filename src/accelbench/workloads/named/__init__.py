"""Models by name (``timm:resnet18``, ``torchvision:vit_b_16``, ``hf:bert``) and model objects
(``accelbench.bench(model, batch)``), turned into ordinary workloads: one adapter module per
prefix (registry.PREFIXES), each with ``resolve(rest) -> type[Workload]`` and
``list_names(pattern)``; the catalogue (workloads/catalogue.py) calls them.

A prefixed name resolves to a Workload class, built from the model's architecture and config only
(random weights: nothing is ever downloaded but, for ``hf:ORG/NAME``, the ~1 kB config), and is
registered under its full name. This package is imported only when a prefixed name appears.
"""
