"""Offline evaluation: the service as served (L1 + L2 + max) over a labelled file, graded.

`metrics` pure functions over per-ticket rows (shared maths from service.calibration),
`run` the replay that makes the rows, `report` the table, JSON and plots, `commands` the
`triage eval` sub-command.
"""
