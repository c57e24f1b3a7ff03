"""triage: decides per helpdesk ticket whether an automatic answer may go out (green),
an operator must review it (yellow) or nothing may leave without approval (red)."""

__version__ = "0.1.0"
