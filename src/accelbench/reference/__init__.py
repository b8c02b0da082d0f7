"""Published results (other people's measurements) as data with their sources."""

from accelbench.reference.published import (
    EPOCH_REFERENCES,
    FEATURE_FINDINGS,
    MODEL_SIZES,
    PUBLISHED_LABEL,
    RATIO_CLAIMS,
    EpochReference,
    FeatureFinding,
    ModelSize,
    RatioClaim,
    Source,
    epoch_references,
)

__all__ = [
    "EPOCH_REFERENCES", "FEATURE_FINDINGS", "MODEL_SIZES", "PUBLISHED_LABEL", "RATIO_CLAIMS",
    "EpochReference", "FeatureFinding", "ModelSize", "RatioClaim", "Source", "epoch_references",
]
