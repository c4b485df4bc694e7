"""A keyring backend for tests: one JSON file named by ``MUSEC_TEST_KEYRING``, so separate
processes (``musec login``, then ``musec run``) share it. Selected with
``PYTHON_KEYRING_BACKEND=tests.support.keyring_file.FileKeyring`` (and the repository on
``PYTHONPATH``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class FileKeyring(KeyringBackend):
    """Keys in a JSON file, unencrypted: it says so as keyrings.alt's PlaintextKeyring does
    (``scheme``, ``file_path``), so musec names it a plaintext store."""

    priority = 1  # type: ignore[assignment]
    scheme = "no encryption"

    @property
    def file_path(self) -> str:
        return str(self._path())

    def _path(self) -> Path:
        return Path(os.environ["MUSEC_TEST_KEYRING"])

    def _load(self) -> dict[str, str]:
        path = self._path()
        return json.loads(path.read_text()) if path.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        self._path().write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError("not stored")
        self._path().write_text(json.dumps(data))


class SealedFileKeyring(FileKeyring):
    """The same file, standing in for a backend that encrypts (one that does not say "no encryption")."""

    scheme = "sealed (a test stand-in)"
