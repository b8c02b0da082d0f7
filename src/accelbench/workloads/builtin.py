"""Importing this module registers every built-in workload."""

from accelbench.workloads import bert, mnist, resnet50, simclr, vae, vgg16  # noqa: F401
