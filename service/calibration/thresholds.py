"""Threshold choice on calibrated probabilities, in the policy's order of costs.

1. green: above every labelled non-green ticket's P(green), and, where the labels support it,
   at a threshold whose exact upper confidence bound on the false-green rate among the
   tickets answered automatically is under the configured rate (`choose_green`);
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


# The thresholds at which the false-green bound is tested: fixed in advance, so that testing
# all of them with a Bonferroni split of the error keeps the 95 % statement true for the one
# chosen (a threshold picked after looking at the data would make the bound optimistic).
BOUND_GRID: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


class GreenChoice(msgspec.Struct, frozen=True):
    threshold: float
    rule: str  # "bound": the certified grid threshold; "zero_false_green": the conservative one
    max_rate: float  # the false-green rate the bound must stay under (TRIAGE_MAX_FALSE_GREEN_RATE)
    confidence: float
    n: int  # tickets the threshold was chosen on
    n_auto: int  # of them answered automatically at the threshold
    false_greens: int  # of them labelled yellow or red
    upper_bound: float  # one-sided Clopper-Pearson bound on the false-green rate among n_auto
    max_non_green: float  # the highest P(green) of a ticket labelled yellow or red
    greens_cleared: float  # share of the green-labelled tickets at or above the threshold
    labels_needed: int  # labelled tickets (at today's mix) for the bound to hold; 0 if it does
    reason: str


def false_green_upper(false_greens: int, n_auto: int, confidence: float = 0.95) -> float:
    """One-sided exact (Clopper-Pearson) upper confidence bound on a binomial rate."""
    from scipy.stats import beta

    if n_auto <= 0:
        return 1.0
    if false_greens >= n_auto:
        return 1.0
    return float(beta.ppf(confidence, false_greens + 1, n_auto - false_greens))


def above_all(values: np.ndarray) -> float:
    """The smallest float64 strictly greater than every value: a threshold (green iff
    P >= threshold) that excludes all of them, also when one of them is exactly 1.0."""
    top = float(np.max(values)) if len(values) else 0.0
    return math.nextafter(top, math.inf)


def choose_green(
    p_green: np.ndarray,
    true_level: np.ndarray,
    *,
    max_rate: float = 0.01,
    confidence: float = 0.95,
    grid: tuple[float, ...] = BOUND_GRID,
    floor: float = 0.8,
    margin: float = 0.02,
) -> GreenChoice:
    """Green threshold on cross-validated P(green): no false green on these tickets, and a
    stated bound on the false-green rate among the tickets answered automatically.

    - zero_false_green: strictly above every non-green ticket's P(green) (`above_all`), so no
      ticket it was chosen on is a false green, whatever the values (1.0 included).
    - bound: the lowest threshold of the fixed `grid` whose one-sided Clopper-Pearson upper
      bound on the false-green rate, at confidence 1 - (1 - confidence) / len(grid)
      (Bonferroni over the grid), is at most `max_rate`. With that, "the false-green rate among
      auto-answered tickets drawn like these is at most max_rate" holds with the stated
      confidence, for the chosen threshold.
    The threshold is the higher of the two when the bound holds somewhere on the grid.
    Otherwise the labels cannot vouch for any rate, and the conservative rule stands: the
    zero-false-green threshold plus `margin`, never under `floor`; `labels_needed` says how
    many labelled tickets at today's mix would let the bound hold.
    """
    p = np.asarray(p_green, dtype=np.float64)
    truth = np.asarray(true_level)
    green = truth == GREEN
    non_green = ~green
    n, n_green = len(p), int(green.sum())
    zero_fg = above_all(p[non_green])
    per_test = 1.0 - (1.0 - confidence) / max(1, len(grid))

    def at(t: float) -> tuple[int, int, float]:
        auto = p >= t
        n_auto, fg = int(auto.sum()), int((auto & non_green).sum())
        return n_auto, fg, false_green_upper(fg, n_auto, per_test)

    certified = [t for t in sorted(grid) if at(t)[2] <= max_rate]
    if certified:
        bound_t = certified[0]
        threshold, rule = max(bound_t, zero_fg), "bound"
    else:
        bound_t, rule = None, "zero_false_green"
        threshold = max(floor, zero_fg + margin) if zero_fg + margin <= 1.0 else zero_fg
    n_auto, fg, _ = at(threshold)
    upper = false_green_upper(fg, n_auto, per_test)
    cleared = float((p[green] >= threshold).mean()) if n_green else 0.0
    # k = 0 holds once (1 - max_rate)^n_auto <= 1 - per_test; scale today's auto share up.
    need_auto = math.ceil(math.log(1.0 - per_test) / math.log(1.0 - max_rate))
    auto_share = n_auto / n if n else 0.0
    labels_needed = 0 if rule == "bound" else (math.ceil(need_auto / auto_share) if auto_share > 0 else -1)
    top = float(p[non_green].max()) if non_green.any() else 0.0
    if rule == "bound":
        reason = (
            f"bound holds from {bound_t} on the grid {list(grid)}; threshold "
            f"{threshold:.4f} (also above every non-green P(green), max {top:.4f}): "
            f"{n_auto} of {n} answered automatically, {fg} false, upper bound "
            f"{upper:.2%} <= {max_rate:.2%} at {confidence:.0%} (Bonferroni over the grid)"
        )
    else:
        reason = (
            f"no grid threshold bounds the false-green rate under {max_rate:.2%} at "
            f"{confidence:.0%}; conservative threshold {threshold:.4f} (highest non-green "
            f"P(green) {top:.4f} + {margin}, floor {floor}): {n_auto} of {n} answered "
            f"automatically, 0 false; about {labels_needed} labelled tickets at this mix "
            f"would be needed for the bound ({need_auto} auto-answered without a false green)"
        )
    return GreenChoice(
        threshold=float(threshold),
        rule=rule,
        max_rate=max_rate,
        confidence=confidence,
        n=n,
        n_auto=n_auto,
        false_greens=fg,
        upper_bound=upper,
        max_non_green=top,
        greens_cleared=cleared,
        labels_needed=labels_needed,
        reason=reason,
    )


class YellowFlagChoice(msgspec.Struct, frozen=True):
    threshold: float
    max_on_green: float  # the highest P(yes) among tickets labelled green
    n_green: int
    reason: str


def choose_yellow_flag(
    p_yes: np.ndarray, true_level: np.ndarray, *, default: float, margin: float = 0.02
) -> YellowFlagChoice:
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
        return YellowFlagChoice(
            threshold=default, max_on_green=float("nan"), n_green=0, reason=f"no green labels: default {default} kept"
        )
    top = float(p_yes[green].max())
    threshold = min(1.0, top + margin)
    return YellowFlagChoice(
        threshold=threshold,
        max_on_green=top,
        n_green=int(green.sum()),
        reason=(
            f"highest P(yes) on the {int(green.sum())} green-labelled tickets is {top:.3f}; "
            f"+{margin} margin = {threshold:.3f} (default {default})"
        ),
    )


class RedChoice(msgspec.Struct, frozen=True):
    red: float
    flags: dict[str, float]
    recall: float  # of labelled red tickets sent to red
    over_escalations: int  # non-red tickets sent to red
    flag_false_positives: int  # flags raised on tickets whose label says the flag is absent
    target: float
    target_reached: bool
    n_red: int


def choose_red(
    p_red: np.ndarray,
    p_flags: dict[str, np.ndarray],
    true_level: np.ndarray,
    flag_labels: dict[str, np.ndarray] | None = None,
    *,
    target: float = 0.9,
    grid: tuple[float, ...] = DEFAULT_GRID,
) -> RedChoice:
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
        labels = np.asarray(flag_labels[f]) if flag_labels and f in flag_labels else np.full(n, -1)
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
    order = np.lexsort((dists.ravel(), fps.ravel(), third.ravel(), second.ravel(), primary.ravel()))
    best = np.unravel_index(order[0], shape)
    return RedChoice(
        red=float(g[best[0]]),
        flags={f: float(g[best[1 + a]]) for a, f in enumerate(names)},
        recall=float(recall[best]),
        over_escalations=int(over[best]),
        flag_false_positives=int(fps[best]),
        target=target,
        target_reached=bool(reached[best]),
        n_red=n_red,
    )


def levels(
    p_green: np.ndarray,
    p_red: np.ndarray,
    p_flags: dict[str, np.ndarray],
    green: float,
    red: float,
    flags: dict[str, float],
    blocked: np.ndarray | None = None,
) -> np.ndarray:
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
    np.add.at(m, (np.asarray(true_level, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
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
        n=len(t),
        accuracy=float((t == p).mean()) if len(t) else 0.0,
        false_greens=int(((p == GREEN) & (t != GREEN)).sum()),
        missed_reds=int(((t == RED) & (p != RED)).sum()),
        over_escalations=int((p > t).sum()),
        red_recall=float(((t == RED) & (p == RED)).sum() / n_red) if n_red else 0.0,
        green_rate=float((p == GREEN).mean()) if len(t) else 0.0,
        confusion=confusion(t, p),
    )
