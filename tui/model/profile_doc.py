"""The `profile --json` document (schema gpurent.profile/1): each setting measured on the
box, its cost per 1,000 images at the box's rate, and the verdict."""

from __future__ import annotations

from typing import Any

from tui.model.profile import ProfileReport, best_cell, usd_per_1k_images

SCHEMA = "gpurent.profile/1"


def profile_document(report: ProfileReport) -> dict[str, Any]:
    best = best_cell(report.cells)
    return {
        "schema": SCHEMA, "box": report.box, "run": report.run, "outcome": report.outcome,
        "message": report.message, "verdict": report.verdict or None,
        "beside": report.beside or None,
        "cpus": report.cpus, "usd_per_hr": report.usd_per_hr,
        "settings": dict(report.settings),
        "cells": [{"batch": c.batch, "workers": c.workers, "img_per_s": c.img_per_s,
                   "dataload_frac": c.dataload_frac, "gpu_util": c.gpu_util,
                   "step_ms": c.step_ms, "gpu_busy_ms_per_step": c.gpu_busy_ms_per_step,
                   "usd_per_1k_images": usd_per_1k_images(report.usd_per_hr, c.img_per_s),
                   "libreyolo_bound": c.bound, "libreyolo_bound_why": c.bound_why,
                   "problem": c.problem, "dropped": list(c.dropped)}
                  for c in report.cells],
        "best": None if best is None else {"batch": best.batch, "workers": best.workers},
    }
