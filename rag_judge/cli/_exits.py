"""Exit statuses the subcommands share, so that a CI script reads one meaning per number."""

from __future__ import annotations

__all__ = ["EXIT_BAD_INPUT", "EXIT_GATE_FAILED", "EXIT_JUDGE_FAILED"]

EXIT_GATE_FAILED = 1  # a gate failed: the numbers are real and below the bar
EXIT_BAD_INPUT = 2  # the config, a file or an option is wrong; nothing was judged
# The judge (or an evaluator) produced no value: the numbers are missing, not low.
EXIT_JUDGE_FAILED = 3
