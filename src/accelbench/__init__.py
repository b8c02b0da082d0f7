"""accelbench: how fast does this machine train and evaluate PyTorch models on each device?"""

__version__ = "0.1.0"

# Public API re-exports are added by accelbench.api once it exists.

__all__ = ["__version__"]
