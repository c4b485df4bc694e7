"""``musec login [PROVIDER]`` / ``musec logout [PROVIDER]``: provider keys in a keyring
(the ``keyring`` library: Secret Service, macOS Keychain, Windows Credential Locker, or
whatever ``PYTHON_KEYRING_BACKEND`` names; each message names the backend, and says so
when it keeps keys in a plaintext file).

The client reads a stored key when its variable is not set and passes it to the daemon
with each request, as it does the variables; the daemon never stores keys (it redacts
them, as it does the environment's). ``keyring`` is imported only when a key is needed.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from .errors import UsageError
from .exitcodes import OK, Exit
from .output import out

SERVICE = "musec"
KEY_VARS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "azure": "AZURE_OPENAI_API_KEY"}
_stored: dict[str, str] | None = None


def _var(provider: str | None) -> tuple[str, str]:
    name = (provider or os.environ.get("MUSEC_MODEL", "anthropic").split("/", 1)[0]).lower()
    if name not in KEY_VARS:
        raise UsageError(f"unknown provider {name!r}; musec login takes one of: {', '.join(KEY_VARS)}")
    return name, KEY_VARS[name]


def _keyring():
    try:
        import keyring
        import keyring.errors
    except ImportError as exc:  # keyring is the optional extra musec[login]
        raise UsageError("musec login needs the keyring library: pip install 'musec[login]' (or keyring)") from exc
    return keyring


def cmd_login(args: argparse.Namespace) -> Exit:
    """Ask for a key (hidden on a terminal; a line of stdin otherwise) and store it."""
    name, var = _var(args.provider)
    kr = _keyring()  # before asking: a person never types a key that cannot be stored
    if not usable(kr):
        raise UsageError(f"no keyring to store the key in here (keyring found no backend: no Secret Service or "
                         f"KWallet); set {var} in the environment instead, or `pip install keyrings.alt` to keep "
                         "keys in a plaintext file")
    where = backend_words(kr)
    if sys.stdin.isatty():
        key = getpass.getpass(f"{name} API key (stored as {var} in {where}): ")
    else:
        key = sys.stdin.readline()
    key = key.strip()
    if not key:
        raise UsageError("no key given; nothing stored")
    try:
        kr.set_password(SERVICE, var, key)
    except kr.errors.KeyringError as exc:
        raise UsageError(f"the keyring refused the key ({exc}); set {var} in the environment instead") from None
    out(f"stored the {name} key in {where}; musec uses it when {var} is not set")
    return OK


def cmd_logout(args: argparse.Namespace) -> Exit:
    """Remove a stored key."""
    name, var = _var(args.provider)
    kr = _keyring()
    try:
        kr.delete_password(SERVICE, var)
    except kr.errors.PasswordDeleteError:
        out(f"no {name} key was stored")
        return OK
    except kr.errors.KeyringError as exc:
        raise UsageError(f"the keyring failed ({exc})") from None
    out(f"removed the {name} key from {backend_words(kr).partition(':')[0]}")
    return OK


def _backend(kr: Any = None) -> Any:
    backend = (kr or _keyring()).get_keyring()
    chained = getattr(backend, "backends", None)  # keyring's ChainerBackend: the first one stores
    return chained[0] if isinstance(chained, (list, tuple)) and chained else backend


def usable(kr: Any = None) -> bool:
    """Whether keyring has a backend that can store a key: not its ``fail`` backend (what
    it picks when it finds none: every call raises) nor its ``null`` one (keeps nothing)."""
    return type(_backend(kr)).__module__ not in ("keyring.backends.fail", "keyring.backends.null")


def backend_words(kr: Any = None) -> str:
    """The keyring backend that holds the keys, named as it is (fresh-user trial s5, F19:
    keyrings.alt's plaintext file was called "the system keyring"): ``the SecretService
    keyring``; a backend that does not encrypt (a ``Plaintext`` one, or one whose
    ``scheme`` says no encryption) says so and where its file is."""
    backend = _backend(kr)
    cls = type(backend)
    name = cls.__name__ if cls.__name__ != "Keyring" else cls.__module__.rpartition(".")[2]  # SecretService.Keyring
    if "plaintext" in cls.__name__.lower() or str(getattr(backend, "scheme", "")).lower().startswith("no enc"):
        path = getattr(backend, "file_path", "")
        return (f"the {name} keyring backend, in plaintext{f' in {path}' if path else ''}: anyone who can read "
                "that file can read the key")
    return f"the {name} keyring"


def stored_keys() -> dict[str, str]:
    """The keys stored by ``musec login`` whose variables are not set (looked up once per
    process; an unusable keyring gives none)."""
    global _stored
    if _stored is None:
        _stored = {}
        missing = [v for v in KEY_VARS.values() if not os.environ.get(v)]
        if missing:
            try:
                import keyring
                import keyring.errors

                for var in missing:
                    value = keyring.get_password(SERVICE, var)
                    if value:
                        _stored[var] = value
            except Exception:  # noqa: BLE001 - no keyring, a locked one, a broken backend: use the environment only
                _stored = {}
    return {k: v for k, v in _stored.items() if not os.environ.get(k)}
