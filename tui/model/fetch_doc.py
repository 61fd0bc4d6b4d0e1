"""The `fetch --json` document (schema gpurent.fetch/1): what the box downloaded,
verified and unpacked."""

from __future__ import annotations

from typing import Any

from tui.model.staging import FetchReport

SCHEMA = "gpurent.fetch/1"


def fetch_document(report: FetchReport) -> dict[str, Any]:
    return {"schema": SCHEMA, "box": report.box, "repo": report.repo,
            "file": report.filename, "dest": report.dest, "verified": report.verified,
            "message": report.message, "bytes": report.bytes,
            "download_seconds": report.download_seconds,
            "extract_seconds": report.extract_seconds, "members": report.members,
            "refused": list(report.refused), "kind": report.kind}
