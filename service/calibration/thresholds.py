"""Threshold choice on calibrated probabilities, in the policy's order of costs.

1. green: the lowest P(green) threshold with zero false greens on the labelled set, plus a
   safety margin, and never under the default floor unless there are enough non-green labels
   for "zero observed false greens" to bound the true rate (rule of three);
2. red and red flags: among a grid of thresholds, those reaching the red-recall target with the
   fewest over-escalations (non-red tickets sent to red).

Pure numpy; `levels` mirrors service.l2.decision.decide_level for probability inputs (a test
holds the two to the same answers), so thresholds are chosen with the rule serving applies.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

GREEN, YELLOW, RED = 0, 1, 2
LEVELS = ("green", "yellow", "red")
DEFAULT_GRID: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05..0.95


class GreenChoice(msgspec.Struct, frozen=True):
    threshold: float
    zero_false_green: float  # max P(green) among non-green labels + margin, before the floor
    max_non_green: float  # the highest P(green) of a ticket labelled yellow or red
    floor: float
    floor_applied: bool
    n_non_green: int
    false_green_upper_95: float  # rule of three: 3 / n_non_green
    reason: str


def choose_green(p_green: np.ndarray, true_level: np.ndarray, *, floor: float = 0.8,
                 margin: float = 0.02, justify_max_rate: float = 0.01) -> GreenChoice:
    """Green threshold with zero false greens on (cross-validated) P(green).

    A ticket is green when P(green) >= threshold, so zero false greens needs a threshold above
    every non-green ticket's P(green); `margin` is added on top for tickets not yet seen. The
    red and flag rules can only take greens away, so this holds whatever they are set to.

    The floor (the hand-set default) is dropped only when the data justify it: with n non-green
    labels and none above the threshold, the one-sided 95% upper bound on the false-green rate
    is 3/n (rule of three); when 3/n <= justify_max_rate (n >= 300 at 1%) the data-derived
    threshold stands even below the floor.
    """
    p_green = np.asarray(p_green, dtype=np.float64)
    true_level = np.asarray(true_level)
    non_green = true_level != GREEN
    n_non_green = int(non_green.sum())
    top = float(p_green[non_green].max()) if n_non_green else 0.0
    zero_fg = min(1.0, top + margin)
    upper = 3.0 / n_non_green if n_non_green else 1.0
    justified = upper <= justify_max_rate
    if zero_fg >= floor:
        threshold, applied = zero_fg, False
        reason = (f"highest P(green) of a non-green ticket is {top:.3f}; +{margin} margin "
                  f"= {zero_fg:.3f}, above the {floor} floor")
    elif justified:
        threshold, applied = zero_fg, False
        reason = (f"highest P(green) of a non-green ticket is {top:.3f}; +{margin} margin "
                  f"= {zero_fg:.3f}, below the {floor} floor, kept because {n_non_green} "
                  f"non-green labels bound the false-green rate under {upper:.2%} "
                  f"(rule of three, 95%)")
    else:
        threshold, applied = floor, True
        reason = (f"highest P(green) of a non-green ticket is {top:.3f}; +{margin} margin "
                  f"= {zero_fg:.3f} would go below the {floor} floor, but {n_non_green} "
                  f"non-green labels only bound the false-green rate under {upper:.1%} "
                  f"(rule of three; {math.ceil(3 / justify_max_rate)} needed for "
                  f"{justify_max_rate:.0%}): floor kept")
    if top + margin > 1.0:
        reason += "; a non-green ticket is this confident, so only P(green) = 1 passes"
    return GreenChoice(threshold=float(threshold), zero_false_green=float(zero_fg),
                       max_non_green=top, floor=floor, floor_applied=applied,
                       n_non_green=n_non_green, false_green_upper_95=float(upper), reason=reason)


class YellowFlagChoice(msgspec.Struct, frozen=True):
    threshold: float
    max_on_green: float  # the highest P(yes) among tickets labelled green
    n_green: int
    reason: str


def choose_yellow_flag(p_yes: np.ndarray, true_level: np.ndarray, *, default: float,
                       margin: float = 0.02) -> YellowFlagChoice:
    """Threshold of a flag that only forbids green and has no labels of its own (instructions).

    The policy makes any ticket with the flag at least yellow, so every ticket labelled green
    is a labelled "no": the flag's P(yes) on them is its noise level. The threshold is the
    lowest that blocks none of them, plus the margin. The zero-false-green guarantee does not
    depend on it (the P(green) threshold alone gives it); it only decides how many greens the
    flag's noise takes away, and what it still catches above that noise.
    """
    p_yes = np.asarray(p_yes, dtype=np.float64)
    green = np.asarray(true_level) == GREEN
    if not green.any():
        return YellowFlagChoice(threshold=default, max_on_green=float("nan"), n_green=0,
                                reason=f"no green labels: default {default} kept")
    top = float(p_yes[green].max())
    threshold = min(1.0, top + margin)
    return YellowFlagChoice(
        threshold=threshold, max_on_green=top, n_green=int(green.sum()),
        reason=(f"highest P(yes) on the {int(green.sum())} green-labelled tickets is {top:.3f}; "
                f"+{margin} margin = {threshold:.3f} (default {default})"))


class RedChoice(msgspec.Struct, frozen=True):
    red: float
    flags: dict[str, float]
    recall: float  # of labelled red tickets sent to red
    over_escalations: int  # non-red tickets sent to red
    flag_false_positives: int  # flags raised on tickets whose label says the flag is absent
    target: float
    target_reached: bool
    n_red: int


def choose_red(p_red: np.ndarray, p_flags: dict[str, np.ndarray], true_level: np.ndarray,
               flag_labels: dict[str, np.ndarray] | None = None, *, target: float = 0.9,
               grid: tuple[float, ...] = DEFAULT_GRID) -> RedChoice:
    """Red and per-flag thresholds: red recall >= target with the fewest over-escalations.

    Exhaustive over grid^(1 + flags). Ties go to higher recall, then fewer flags raised on
    tickets labelled without that flag (`flag_labels`: 1 yes, 0 no, -1 unknown), then to the
    thresholds nearest the middle of the grid (least sensitive to a shift in probabilities).
    When no combination reaches the target, the highest recall wins, then the fewest
    over-escalations, then the same order.
    """
    p_red = np.asarray(p_red, dtype=np.float64)
    is_red = np.asarray(true_level) == RED
    n, n_red = len(p_red), int(is_red.sum())
    names = list(p_flags)
    g = np.asarray(grid, dtype=np.float64)
    k = len(names)

    def along(axis: int, values: np.ndarray) -> np.ndarray:
        """values (grid, ...) reshaped to vary along one flag axis of a (grid,)*k array."""
        shape = [1] * k + list(values.shape[1:])
        shape[axis] = len(g)
        return values.reshape(shape)

    # any_flag[i_1, ..., i_k, t]: some flag f fires on ticket t at threshold g[i_f]
    any_flag = np.zeros((1,) * k + (n,), dtype=bool)
    fp = np.zeros((1,) * k, dtype=np.int64)
    mid = (g[0] + g[-1]) / 2
    dist = np.zeros((1,) * k)
    for axis, f in enumerate(names):
        fires = np.asarray(p_flags[f], dtype=np.float64)[None, :] >= g[:, None]
        any_flag = any_flag | along(axis, fires)
        labels = (np.asarray(flag_labels[f]) if flag_labels and f in flag_labels
                  else np.full(n, -1))
        fp = fp + along(axis, (fires & (labels == 0)[None, :]).sum(axis=1))
        dist = dist + along(axis, np.abs(g - mid))
    shape = (len(g),) + (len(g),) * k
    over = np.empty(shape, dtype=np.int64)
    tp = np.empty(shape, dtype=np.int64)
    for i, t_red in enumerate(g):  # one red threshold at a time keeps memory at grid^k * n
        red = any_flag | (p_red >= t_red)
        tp[i] = (red & is_red).sum(axis=-1)
        over[i] = (red & ~is_red).sum(axis=-1)
    recall = tp / max(n_red, 1)
    reached = recall >= target - 1e-12
    fps = np.broadcast_to(fp[None], shape)
    dists = np.broadcast_to(dist[None], shape) + np.abs(g - mid).reshape((-1,) + (1,) * k)
    # lexsort: last key is primary
    # reached: fewest over-escalations, then highest recall; not reached: the reverse
    primary = np.where(reached, 0, 1)
    second = np.where(reached, over, -recall)
    third = np.where(reached, -recall, over)
    order = np.lexsort((dists.ravel(), fps.ravel(), third.ravel(), second.ravel(),
                        primary.ravel()))
    best = np.unravel_index(order[0], shape)
    return RedChoice(red=float(g[best[0]]),
                     flags={f: float(g[best[1 + a]]) for a, f in enumerate(names)},
                     recall=float(recall[best]), over_escalations=int(over[best]),
                     flag_false_positives=int(fps[best]), target=target,
                     target_reached=bool(reached[best]), n_red=n_red)


def levels(p_green: np.ndarray, p_red: np.ndarray, p_flags: dict[str, np.ndarray],
           green: float, red: float, flags: dict[str, float],
           blocked: np.ndarray | None = None) -> np.ndarray:
    """Level per ticket under service.l2.decision's rule, from probabilities.

    red flag P(yes) >= its threshold, or P(red) >= red -> red; else P(green) >= green and not
    blocked (a yellow flag, a generated answer...) -> green; else yellow.
    """
    p_green = np.asarray(p_green, dtype=np.float64)
    out = np.full(len(p_green), YELLOW, dtype=np.int64)
    green_ok = p_green >= green
    if blocked is not None:
        green_ok &= ~np.asarray(blocked, dtype=bool)
    out[green_ok] = GREEN
    is_red = np.asarray(p_red, dtype=np.float64) >= red
    for f, p in p_flags.items():
        is_red |= np.asarray(p, dtype=np.float64) >= flags.get(f, 0.5)
    out[is_red] = RED
    return out


def confusion(true_level: np.ndarray, predicted: np.ndarray) -> list[list[int]]:
    """3x3 counts, rows = labelled level, columns = predicted (green, yellow, red)."""
    m = np.zeros((3, 3), dtype=np.int64)
    np.add.at(m, (np.asarray(true_level, dtype=np.int64), np.asarray(predicted, dtype=np.int64)),
              1)
    return m.tolist()


class LevelSummary(msgspec.Struct, frozen=True):
    n: int
    accuracy: float
    false_greens: int  # labelled yellow or red, predicted green
    missed_reds: int  # labelled red, predicted below red
    over_escalations: int  # predicted above the label
    red_recall: float
    green_rate: float  # share of tickets answered automatically
    confusion: list[list[int]]


def summarise(true_level: np.ndarray, predicted: np.ndarray) -> LevelSummary:
    t = np.asarray(true_level, dtype=np.int64)
    p = np.asarray(predicted, dtype=np.int64)
    n_red = int((t == RED).sum())
    return LevelSummary(
        n=len(t), accuracy=float((t == p).mean()) if len(t) else 0.0,
        false_greens=int(((p == GREEN) & (t != GREEN)).sum()),
        missed_reds=int(((t == RED) & (p != RED)).sum()),
        over_escalations=int((p > t).sum()),
        red_recall=float(((t == RED) & (p == RED)).sum() / n_red) if n_red else 0.0,
        green_rate=float((p == GREEN).mean()) if len(t) else 0.0,
        confusion=confusion(t, p))
