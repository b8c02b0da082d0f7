"""Importing this module registers every built-in workload."""

from accelbench.workloads import (  # noqa: F401
    bert,
    gpt2,
    llama,
    mnist,
    nanogpt_char,
    resnet50,
    simclr,
    vae,
    vgg16,
)
