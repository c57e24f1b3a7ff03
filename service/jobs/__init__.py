"""Offline jobs (eval, recalibrate, audit): CLI entry points that run outside the serving path."""
