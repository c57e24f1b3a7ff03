"""docs/results/cascade.json: would a second opinion from the 1.5B on the tickets just under the
green threshold clear more greens without a false green (issue 13, "Optional cascade")?

For each graded source (dev, public-style) the 0.5B decides as in `triage study sources` (risk
head on ticket@mid fitted on the other sources, green threshold above every non-green of its
out-of-fold P(green), green gate). Tickets the gate lets through with P(green) from
`CASCADE_BAND_FROM` up to the threshold are then re-read by the 1.5B: green when a risk head
on the 1.5B's own ticket@mid says P(green) at or above its own zero-false-green threshold.

The 1.5B's heads are fitted, like the 0.5B's, on every labelled ticket of the other sources
(for dev: train.jsonl and public-style; for public-style: train.jsonl and dev), with the
threshold from their own out-of-fold P(green); nothing graded is fitted on. Time: the 1.5B
runs only on the band, so the mean time per ticket grows by the band's share times the 1.5B's
time per ticket over the 0.5B's (`_time_ratio`, from docs/results/dev-1.5b.json and
dev-0.5b.json).

Run from the checkout with both models fetched (`triage fetch-model --size 1.5b`) and the
public-style texts joined (data/public-style/README.md); the replays go to the replay cache.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import msgspec
import numpy as np

from service.calibration.fit import single_thread_blas
from service.calibration.replay import feature_names
from service.calibration.study import CASCADE_BAND_FROM, GREEN, RISK, arrays, fit_green
from service.calibration.study_commands import replayed_sources
from service.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
TICKETS = ROOT.parent / "shared" / "data" / "tickets"
SOURCES = {
    "train": TICKETS / "train.jsonl",
    "dev": TICKETS / "dev.jsonl",
    "public-style": ROOT / "var" / "data" / "public-style.jsonl",
}
OUT = ROOT / "docs" / "results" / "cascade.json"
GRADED = ("dev", "public-style")


def _examples(files: dict[str, Path], size: str) -> tuple[dict, list[str], int]:
    """{source: examples} replayed through the bundled model of `size`, through the replay
    cache, as `triage study` reads them."""
    settings = msgspec.structs.replace(load_settings(), model_size=size)
    data = [f"{name}={path}" for name, path in files.items()]
    args = argparse.Namespace(data=data, cache_dir=None, l1_features=False, quiet=False)
    sources, questions, n_layer, _ = replayed_sources(args, settings)
    return sources, questions, n_layer


def main() -> int:
    small, questions, n_layer = _examples(SOURCES, "0.5b")
    names_small = feature_names("ticket@mid", questions, n_layer)
    report: dict = {"band_from": CASCADE_BAND_FROM, "graded": {}}
    with single_thread_blas():
        first = {}
        for held in GRADED:
            pool = [e for s, ex in small.items() if s != held for e in ex]
            fitted = fit_green(arrays(pool, names_small, names_small), gate_quantile=0.95)
            graded = arrays(small[held], names_small, names_small)
            p = fitted.head.predict_proba(graded.x)[:, GREEN]  # type: ignore[attr-defined]
            passes = fitted.gate.distances(graded.gate_x) <= fitted.gate.info.threshold  # type: ignore[union-attr]
            first[held] = (graded, p, passes, fitted.threshold)
    band_ids = {
        held: {i for i, pi, ok in zip(g.ids, p, passes, strict=True) if ok and CASCADE_BAND_FROM <= pi < threshold}
        for held, (g, p, passes, threshold) in first.items()
    }
    big, big_questions, big_layers = _examples(SOURCES, "1.5b")
    names_big = feature_names("ticket@mid", big_questions, big_layers)
    pools = {held: tuple(s for s in SOURCES if s != held) for held in GRADED}
    with single_thread_blas():
        for held in GRADED:
            graded, p, passes, threshold = first[held]
            pool = [e for s in pools[held] for e in big[s]]
            second = fit_green(arrays(pool, names_big), gate_quantile=None)
            readable = {e.id: e for e in big[held]}
            band = [i for i in graded.ids if i in band_ids[held]]
            band_arrays = arrays([readable[i] for i in band], names_big)
            p_big = second.head.predict_proba(band_arrays.x)[:, GREEN]  # type: ignore[attr-defined]
            cleared_by_big = {i for i, q in zip(band_arrays.ids, p_big, strict=True) if q >= second.threshold}
            green = graded.y == GREEN
            auto = (p >= threshold) & passes
            with_cascade = auto | np.isin(graded.ids, sorted(cleared_by_big))
            report["graded"][held] = {
                "n": len(graded.y),
                "greens": int(green.sum()),
                "first_threshold": threshold,
                "second_threshold": second.threshold,
                "second_fitted_on": {s: len(big[s]) for s in pools[held]},
                "band": len(band),
                "band_share": len(band) / len(graded.y),
                "without": {
                    "greens_cleared": float(auto[green].mean()),
                    "false_greens": int((auto & ~green).sum()),
                },
                "with": {
                    "greens_cleared": float(with_cascade[green].mean()),
                    "false_greens": int((with_cascade & ~green).sum()),
                    "false_green_ids": [
                        i for i, a, g in zip(graded.ids, with_cascade, green, strict=True) if a and not g
                    ],
                },
                "band_detail": [
                    {
                        "id": i,
                        "p_0_5b": float(p[graded.ids.index(i)]),
                        "p_1_5b": float(q),
                        "label": RISK[int(graded.y[graded.ids.index(i)])],
                    }
                    for i, q in zip(band_arrays.ids, p_big, strict=True)
                ],
            }
    report["time_ratio_1_5b"] = ratio = _time_ratio()
    report["decision"] = _decide(report["graded"], ratio)
    report["command"] = "python scripts/cascade_study.py"
    report["machine"] = {"platform": platform.platform(), "python": platform.python_version()}
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


def _decide(graded: dict, time_ratio: float) -> dict:
    """The issue's bar: more greens cleared, no false green added, at most 1.5x the mean time
    per ticket (the 1.5B runs on the band only), on every graded source."""
    per = {}
    for name, g in graded.items():
        mean_time = 1.0 + g["band_share"] * time_ratio
        per[name] = {
            "more_greens": g["with"]["greens_cleared"] > g["without"]["greens_cleared"],
            "no_false_green_added": g["with"]["false_greens"] <= g["without"]["false_greens"],
            "mean_time_ratio": mean_time,
            "time_ok": mean_time <= 1.5,
        }
    ship = all(v["more_greens"] and v["no_false_green_added"] and v["time_ok"] for v in per.values())
    return {"ship": ship, "per_source": per}


def _time_ratio() -> float:
    """The 1.5B's median time per ticket over the 0.5B's, raw, on the dev set (same prompts)."""
    p50 = [
        json.loads((ROOT / "docs" / "results" / f).read_text())["latency_ms"]["p50"]
        for f in ("dev-1.5b.json", "dev-0.5b.json")
    ]
    return p50[0] / p50[1]


if __name__ == "__main__":
    sys.exit(main())
