"""What a run concludes about its judge numbers once every evaluator is done: the human labels
of a slice (read before any sample is scored, so a bad label file stops the run at once), the
bias-corrected estimates from them, the jury's agreement and the judge audit, stored on the
Report for its renderers and gates."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from rag_judge.analysis.audit import audit_report, failed_judge_warnings
from rag_judge.analysis.calibration import labels_from_dataset, load_labels
from rag_judge.analysis.jury import jury_agreement
from rag_judge.analysis.ppi import few_labels_warnings, ppi_estimates
from rag_judge.analysis.relevance_labels import (
    ChunkGrades,
    load_relevance,
    relevance_from_dataset,
)
from rag_judge.analysis.retrieval_ppi import chunk_grading, judge_graded, retrieval_corrections
from rag_judge.config import ExperimentConfig
from rag_judge.errors import ConfigError
from rag_judge.report.model import Report, ReportWarning, WarningKind

__all__ = ["check_labels", "conclude", "coverage_warnings", "label_warnings", "read_labels"]

log = logging.getLogger("rag_judge.pipeline")

Labels = dict[str, dict[str, float]]


def check_labels(cfg: ExperimentConfig) -> None:
    """A label file the config names that is not there: a ConfigError at ``labels.path`` (its
    ``loc``, for a caller that knows the YAML's lines) naming the path resolved, as the config
    made it relative to its own folder."""
    path = cfg.labels.path if cfg.labels is not None else None
    if path is not None and (path.is_dir() or not path.exists()):
        what = "is a folder, not a label file" if path.is_dir() else "file not found"
        raise ConfigError(f"labels.path: {what}: {path.resolve()}", loc=("labels", "path"))


def read_labels(cfg: ExperimentConfig) -> Labels:
    """The config's human labels (id -> metric -> label); empty without ``labels``."""
    spec = cfg.labels
    if spec is None:
        return {}
    check_labels(cfg)
    if spec.column is not None:
        source = spec.path or cfg.dataset
        if source is None:
            raise ConfigError("labels.column reads the dataset file: set 'dataset' or labels.path")
        found = labels_from_dataset(source, spec.column)
    else:
        assert spec.path is not None  # LabelsConfig needs a path or a column
        found = load_labels(spec.path)
    read_relevance(cfg)  # chunk grades too: a bad one stops the run before any work
    return {sid: {m: float(v) for m, v in row.items()} for sid, row in found.items()}


def conclude(report: Report, cfg: ExperimentConfig, labels: Labels) -> Report:
    """``report`` with its labelled slice, PPI estimates, jury agreement and audit filled in.
    Labels of ids the run did not evaluate are left out, with a warning that counts them."""
    ids = _samples_among(report, labels)
    unmatched = label_warnings(sorted(labels.keys() - ids), len(labels))
    report.labels = {sid: row for sid, row in labels.items() if sid in ids}
    if report.labels and cfg.labels is not None:
        report.estimates = ppi_estimates(
            report,
            confidence=report.confidence,
            pass_score=cfg.labels.pass_score,
            seed=cfg.seed,
            method=cfg.labels.method,
        )
    partial = _correct_retrieval(report, cfg)
    if any(len(s.judged_by) > 1 for s in report.signatures.values()):  # else no pass for it
        report.jury = jury_agreement(report)
    report.audit = audit_report(report, seed=cfg.seed)
    report.warnings = [*unmatched, *partial, *few_labels_warnings(report)]
    report.warnings += coverage_warnings(report, cfg)
    report.warnings += failed_judge_warnings(report)  # a judge with no verdict at all
    for warning in report.warnings:
        log.warning("%s", warning.message)
    return report


def read_relevance(cfg: ExperimentConfig) -> dict[str, ChunkGrades]:
    """The human chunk grades of the config's labels (a line's ``relevance``), by sample id."""
    spec = cfg.labels
    if spec is None:
        return {}
    if spec.column is not None:
        source = spec.path or cfg.dataset
        return {} if source is None else relevance_from_dataset(source, spec.column)
    return {} if spec.path is None else load_relevance(spec.path)


def _correct_retrieval(report: Report, cfg: ExperimentConfig) -> list[ReportWarning]:
    """The retrieval metrics computed from judge grades, corrected with the human chunk grades
    of the labels (analysis/retrieval_ppi.py): their estimates, labels and grade confusion, and
    a warning for the queries whose grading is incomplete; and, labels or not, what the
    review mode needs to take chunk grades."""
    if not judge_graded(cfg.evaluators):
        return []
    if cfg.labels is None:
        report.chunk_grading = chunk_grading(cfg.evaluators, cfg.seed, {})
        return []
    graded = read_relevance(cfg)
    ids = _samples_among(report, graded)
    relevance = {sid: g for sid, g in graded.items() if sid in ids}
    found = retrieval_corrections(
        report, cfg.evaluators, relevance, confidence=report.confidence, method=cfg.labels.method
    )
    for sid, row in found.labels.items():
        report.labels.setdefault(sid, {}).update(row)
    report.estimates.update(found.estimates)
    report.grade_confusion = found.confusion
    report.chunk_grading = chunk_grading(cfg.evaluators, cfg.seed, found.grades)
    return found.warnings


def _samples_among(report: Report, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` are samples of the run, found without a set of every sample's id (a
    million ids cost ~100 MB as a set of strings; a run without labels needs none)."""
    wanted = set(ids)
    if not wanted:
        return set()
    return {sid for sid in report.index().ids if sid in wanted}


def label_warnings(unmatched: list[str], total: int) -> list[ReportWarning]:
    """A warning when labelled ids are no sample of the run (``unmatched``, of ``total``
    labelled ids): the estimates leave them out, so it is said in the report, not only in the
    log (a mistyped id, or a label file made for another dataset)."""
    if not unmatched:
        return []
    examples = f"(e.g. {', '.join(repr(s) for s in unmatched[:3])})"
    if len(unmatched) == total:
        message = (
            f"none of the {total} labelled ids is a sample of this run {examples}, so there "
            "are no bias-corrected estimates: are the labels for this dataset?"
        )
    else:
        message = (
            f"{len(unmatched)} of the {total} labelled ids are not samples of this run and were "
            f"left out {examples}; the bias-corrected estimates use the labels of the others."
        )
    return [
        ReportWarning(
            kind=WarningKind.UNMATCHED_LABELS,
            metric="labels",
            value=len(unmatched),
            threshold=0,
            message=message,
        )
    ]


def coverage_warnings(report: Report, cfg: ExperimentConfig) -> list[ReportWarning]:
    """What each evaluator concludes from the finished report (a retrieval evaluator whose
    mean judged@k fell below its ``min_judged``, say)."""
    out = []
    for ev in cfg.evaluators:
        out += ev.conclusions(report)
    return out
