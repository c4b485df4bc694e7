"""What each trial of ``musec eval`` installs comes from where this musec was installed from
(PEP 610 ``direct_url.json``), editable or not (fresh-user s8 K5: musec installed with
``pip install .`` made every trial ask the package index for ``musec==0.1.0``, which is not
there, and fail as an agent error). Each case is a real ``.dist-info`` folder first on
``sys.path`` of a real subprocess of Harbor's venv, where ``musec.harbor.agent`` runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.eval.test_eval_harbor import _harbor_venv
from tests.support.distinfo import run_with_dist_info

pytestmark = pytest.mark.slow
PROBE = ("from musec.harbor.agent import _local_source\n"
         "try:\n    print(_local_source())\nexcept RuntimeError as exc:\n    print('refused:', exc)\n")


def _source_for(tmp_path: Path, direct_url: dict | None) -> str:
    return run_with_dist_info(str(_harbor_venv() / "bin" / "python"), tmp_path, direct_url, PROBE)


@pytest.mark.parametrize("editable", [False, True])
def test_a_checkout_editable_or_not_is_the_source(tmp_path: Path, editable: bool) -> None:
    checkout = tmp_path / "my clone"
    checkout.mkdir()
    url = {"url": checkout.as_uri(), "dir_info": {"editable": True} if editable else {}}
    assert _source_for(tmp_path, url) == str(checkout)


def test_a_local_wheel_is_the_source_and_the_index_is_asked_only_for_an_index_install(tmp_path: Path) -> None:
    wheel = tmp_path / "musec-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    assert _source_for(tmp_path / "a", {"url": wheel.as_uri(), "archive_info": {}}) == str(wheel)
    assert _source_for(tmp_path / "b", None) == "None"


def test_a_source_that_is_gone_is_refused_not_looked_up_in_the_index(tmp_path: Path) -> None:
    gone = {"url": (tmp_path / "deleted").as_uri(), "dir_info": {}}
    said = _source_for(tmp_path, gone)
    assert said.startswith("refused: musec was installed from") and "--ak wheel=PATH" in said
