"""The `check --json` and `doctor --json` documents (schemas gpurent.check/1 and
gpurent.doctor/1): pure, from the reports tui.model.preflight reads off the box."""

from __future__ import annotations

from typing import Any

from tui.model.preflight import CheckReport, DoctorReport, GpuHealth, throttle_reasons

CHECK_SCHEMA = "gpurent.check/1"
DOCTOR_SCHEMA = "gpurent.doctor/1"


def health_document(h: GpuHealth) -> dict[str, Any]:
    """One GPU's health as nvidia-smi read it, with its throttle reasons in words."""
    data = dict(h.__dict__)
    data["compute_cap"] = list(h.compute_cap) if h.compute_cap else None
    data["throttle_reasons"] = [w for w, _ in throttle_reasons(h.throttle_mask)] \
        if h.throttle_mask else []
    return data


def check_document(report: CheckReport) -> dict[str, Any]:
    return {
        "schema": CHECK_SCHEMA, "box": report.box, "python": report.python,
        "python_version": report.python_version, "executable": report.executable,
        "checked_at": report.checked_at, "verdict": report.verdict,
        "exit_code": report.exit_code, "complete": report.complete,
        "findings": [f.as_dict() for f in report.findings],
        "torch": dict(report.torch), "gpus": [g.as_dict() for g in report.gpus],
        "health": [health_document(h) for h in report.health],
        "libreyolo": dict(report.libreyolo), "places": dict(report.places),
        "notes": list(report.notes),
    }


def doctor_document(report: DoctorReport) -> dict[str, Any]:
    return {"schema": DOCTOR_SCHEMA, "box": report.box, "data": report.data,
            "exit_code": report.exit_code, "strict": report.strict, "failure": report.failure,
            "libreyolo_version": report.libreyolo_version, "summary": dict(report.summary),
            "stats": dict(report.stats), "findings_dropped": report.dropped,
            "findings": [{"severity": f.severity, "check_id": f.check_id,
                          "message": f.message, "split": f.split, "count": f.count,
                          "paths": list(f.paths)} for f in report.findings]}
