"""Where results live: atomic JSON files and the per-user results folder."""
