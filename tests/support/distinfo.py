"""A fake installed ``musec`` for tests of what PEP 610's ``direct_url.json`` says about
where it was installed from: a real ``.dist-info`` folder to put first on ``sys.path`` of a
real subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def run_with_dist_info(python: str, tmp_path: Path, direct_url: dict | None, code: str) -> str:
    """Run ``code`` with ``python``, a ``musec-0.1.0.dist-info`` holding ``direct_url``
    (none when ``None``) first on its ``sys.path``; its stdout, stripped."""
    site = tmp_path / "site"
    info = site / "musec-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: musec\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    full = f"import sys; sys.path.insert(0, {str(site)!r})\n{code}"
    proc = subprocess.run([python, "-c", full], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()
