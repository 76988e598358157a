"""Statistics as pure functions over arrays: exact means' seeded bootstrap intervals (clustered
by conversation too), the paired sign-flip test and p-value corrections (``bootstrap``),
prediction-powered inference (``ppi``), and agreement between several coders (``agreement``)."""

from rag_judge.stats.bootstrap import (
    CORRECTIONS,
    EXACT_MAX,
    adjust_pvalues,
    bootstrap_ci,
    bootstrap_cis,
    clustered_bootstrap_ci,
    sign_flip_pvalue,
)
from rag_judge.stats.ppi import (
    MeanCI,
    PPIMean,
    PPIMethod,
    RoganGladenRate,
    mean_ci,
    normal_mean_ci,
    power_tuned_lambda,
    ppi_mean,
    rogan_gladen,
    z_value,
)

__all__ = [
    "CORRECTIONS",
    "EXACT_MAX",
    "MeanCI",
    "PPIMean",
    "PPIMethod",
    "RoganGladenRate",
    "adjust_pvalues",
    "bootstrap_ci",
    "bootstrap_cis",
    "clustered_bootstrap_ci",
    "mean_ci",
    "normal_mean_ci",
    "power_tuned_lambda",
    "ppi_mean",
    "rogan_gladen",
    "sign_flip_pvalue",
    "z_value",
]
