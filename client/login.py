"""``musec login [PROVIDER]`` / ``musec logout [PROVIDER]``: provider keys in the system
keyring (the ``keyring`` library: Secret Service, macOS Keychain, Windows Credential
Locker, or whatever ``PYTHON_KEYRING_BACKEND`` names).

The client reads a stored key when its variable is not set and passes it to the daemon
with each request, as it does the variables; the daemon never stores keys (it redacts
them, as it does the environment's). ``keyring`` is imported only when a key is needed.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

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
    if sys.stdin.isatty():
        key = getpass.getpass(f"{name} API key (stored in the system keyring as {var}): ")
    else:
        key = sys.stdin.readline()
    key = key.strip()
    if not key:
        raise UsageError("no key given; nothing stored")
    try:
        kr.set_password(SERVICE, var, key)
    except kr.errors.KeyringError as exc:
        raise UsageError(f"the system keyring refused the key ({exc}); set {var} in the environment instead") from None
    out(f"stored the {name} key in the system keyring; musec uses it when {var} is not set")
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
        raise UsageError(f"the system keyring failed ({exc})") from None
    out(f"removed the {name} key from the system keyring")
    return OK


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
