"""Content-addressed blobs for outputs too big for a log line (DESIGN §5 rule 5)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


class BlobStore:
    """Stores byte strings under ``root/<2 hex>/<62 hex>`` named by their SHA-256."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, data: bytes) -> str:
        """Store ``data`` durably (write, fsync, rename); return its sha256 hex.

        Raises:
            OSError: it could not be written (the part written is removed).
        """
        digest = hashlib.sha256(data).hexdigest()
        path = self.path(digest)
        if path.exists():
            return digest
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            # A full disk (ENOSPC) must not be kept full by the part written (fresh-user s8 J4).
            tmp.unlink(missing_ok=True)
            raise
        return digest

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest[2:]

    def get(self, digest: str) -> bytes:
        """The blob's bytes. Raises ``FileNotFoundError``."""
        return self.path(digest).read_bytes()
