"""What `musec eval` installs into Harbor's venv comes from where this musec was installed
from (PEP 610 ``direct_url.json``): a new user's `pip install .` from a clone made it ask the
package index for ``musec[eval]==0.1.0``, which is not there. Each case is a real
``.dist-info`` folder found first on ``sys.path`` of a real subprocess."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.distinfo import run_with_dist_info

PROBE = "from musec.client.evaluate import _musec_spec; print(_musec_spec())"


def _spec_for(tmp_path: Path, direct_url: dict | None) -> str:
    return run_with_dist_info(sys.executable, tmp_path, direct_url, PROBE)


@pytest.mark.parametrize("editable", [False, True])
def test_a_checkout_installs_from_the_checkout(tmp_path: Path, editable: bool) -> None:
    checkout = tmp_path / "my clone"
    checkout.mkdir()
    url = {"url": checkout.as_uri(), "dir_info": {"editable": True} if editable else {}}
    assert _spec_for(tmp_path, url) == ("-e " if editable else "") + f"{checkout}[eval]"


def test_a_local_wheel_installs_from_the_wheel(tmp_path: Path) -> None:
    wheel = tmp_path / "musec-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    url = {"url": wheel.as_uri(), "archive_info": {}}
    assert _spec_for(tmp_path, url) == f"musec[eval] @ {wheel.as_uri()}"


def test_an_index_install_or_a_gone_checkout_asks_the_index_for_this_version(tmp_path: Path) -> None:
    assert _spec_for(tmp_path / "a", None) == "musec[eval]==0.1.0"
    gone = {"url": (tmp_path / "deleted").as_uri(), "dir_info": {}}
    assert _spec_for(tmp_path / "b", gone) == "musec[eval]==0.1.0"
