"""Periodic LLM-judge audit of triage decisions: rubric, judge, Cohen's kappa calibration, gating.

See docs/audit.md. Pure parts (stats, rubric, cases, sampling, gating) import no model and no Redis.
"""
