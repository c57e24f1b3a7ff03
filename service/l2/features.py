"""Hidden-state features by name: which layers the calibration may read, and what a name means.

`<question>` is the final hidden state at the question's answer position, `<question>@l<N>`
layer N there, `ticket@l<N>` layer N averaged over the ticket's tokens
(service.l2.decide.hidden_features). Feature *sets* name them independently of the model's depth.
"""

from __future__ import annotations

from collections.abc import Iterable

from service.l2.runner import Capture

# What every worker records for recalibration from operator decisions, whatever artifact it
# serves: the features the bundled calibration's heads and green gate read (the defaults of
# `triage recalibrate`), so decisions made before any artifact was loaded can still train one.
RECORDED = "ticket@mid"


def replay_capture(n_layer: int) -> Capture:
    """The candidate layers: the middle and three quarters down (pooled and at the answers),
    and the last layer whose output covers every token (pooled). llama.cpp keeps only the
    output rows in the final layer, so the final layer's answer state is the plain hidden state."""
    mid, late = n_layer // 2 - 1, (3 * n_layer) // 4 - 1
    return Capture(pooled=(mid, late, n_layer - 2), answers=(mid, late))


# Feature sets by name, resolved against the model's layers (`feature_names`): "answers" is
# the final layer at every question's answer position, "answers@mid" the middle layer there,
# "ticket@mid" / "ticket@late" / "ticket@last" a layer averaged over the ticket's tokens.
FEATURE_SETS: tuple[str, ...] = ("answers", "answers@mid", "answers@late", "ticket@mid", "ticket@late", "ticket@last")


def feature_names(spec: str | tuple[str, ...], questions: Iterable[str], n_layer: int) -> tuple[str, ...]:
    """The hidden-state vector names (service.l2.decide.hidden_features) a spec stands for;
    a spec is one name of FEATURE_SETS or several joined with '+'."""
    capture = replay_capture(n_layer)
    mid, late = capture.answers
    last = capture.pooled[-1]
    layer = {"mid": mid, "late": late, "last": last}
    parts = spec.split("+") if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for part in parts:
        base, _, where = part.partition("@")
        if part == "l1":  # L1's rule hits (measured by `triage study --l1-features` only)
            names.append("l1")
            continue
        if part not in FEATURE_SETS:
            raise ValueError(f"unknown feature set {part!r}; known: {', '.join(FEATURE_SETS)}")
        if base == "answers":
            names += [q if not where else f"{q}@l{layer[where]}" for q in questions]
        else:
            names.append(f"ticket@l{layer[where]}")
    return tuple(names)
