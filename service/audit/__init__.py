"""Periodic LLM-judge audit of triage decisions: rubric, judge, Cohen's kappa calibration, gating.

Public surface: `Judge`, `AuditedDecision`, `compare` (judge.py); `calibrate`, `gating_state`
(calibration.py); `run_audit` (job.py); `cohen_kappa`, `wilson_interval` (stats.py). The pure
parts (stats, rubric, cases, sampling, gating) import no model and no Redis. See docs/audit.md.
"""
