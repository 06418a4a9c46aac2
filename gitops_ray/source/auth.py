"""Repository credentials, handed to git without ever landing in a URL, argv or log.

HTTPS tokens reach git through ``GIT_ASKPASS`` (a tiny script that echoes environment
variables of the git process), so they never appear in ``.git/config``, in ``ps`` output
or in error messages that echo the remote URL. SSH keys are passed with
``GIT_SSH_COMMAND -i <file>``; a key given as text (e.g. from a Secret in an environment
variable) is written once to a 0600 file in the cache. :class:`Credentials` hides its
secrets from ``repr`` so printing settings cannot leak them.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENV_PREFIX = "GITOPS_RAY_GIT_"
_ASKPASS = """#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' "$GITOPS_RAY_ASKPASS_USERNAME" ;;
  *) printf '%s\\n' "$GITOPS_RAY_ASKPASS_PASSWORD" ;;
esac
"""


@dataclass(frozen=True)
class Credentials:
    """How to authenticate to one repository (HTTPS token or SSH key)."""

    username: str = "git"
    token: str | None = field(default=None, repr=False)
    ssh_key_file: str | None = None
    ssh_key: str | None = field(default=None, repr=False)
    known_hosts_file: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Credentials | None:
        """``GITOPS_RAY_GIT_{USERNAME,TOKEN,SSH_KEY,SSH_KEY_FILE,KNOWN_HOSTS}``, if any."""
        env = os.environ if env is None else env
        values = {k: env.get(ENV_PREFIX + k) for k in
                  ("USERNAME", "TOKEN", "SSH_KEY", "SSH_KEY_FILE", "KNOWN_HOSTS")}
        if not any(values[k] for k in ("TOKEN", "SSH_KEY", "SSH_KEY_FILE")):
            return None
        return cls(username=values["USERNAME"] or "git", token=values["TOKEN"],
                   ssh_key=values["SSH_KEY"], ssh_key_file=values["SSH_KEY_FILE"],
                   known_hosts_file=values["KNOWN_HOSTS"])


def git_env(credentials: Credentials | None, secrets_dir: Path) -> dict[str, str]:
    """Environment for one git process: never prompts, authenticates as given."""
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false", "SSH_ASKPASS": "/bin/false",
           "GCM_INTERACTIVE": "never", "GIT_SSH_COMMAND": "ssh -o BatchMode=yes"}
    if credentials is None:
        return env
    if credentials.token:
        env.update({"GIT_ASKPASS": str(_askpass(secrets_dir)),
                    "GITOPS_RAY_ASKPASS_USERNAME": credentials.username,
                    "GITOPS_RAY_ASKPASS_PASSWORD": credentials.token})
    key_file = credentials.ssh_key_file or (
        str(_key_file(secrets_dir, credentials.ssh_key)) if credentials.ssh_key else None)
    if key_file:
        env["GIT_SSH_COMMAND"] = ssh_command(key_file, credentials.known_hosts_file)
    return env


def ssh_command(key_file: str, known_hosts: str | None) -> str:
    """The ``GIT_SSH_COMMAND`` for a key file (host keys pinned when a file is given)."""
    parts = ["ssh", "-i", key_file, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]
    if known_hosts:
        parts += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    else:
        parts += ["-o", "StrictHostKeyChecking=accept-new"]
    return shlex.join(parts)


def _askpass(secrets_dir: Path) -> Path:
    path = secrets_dir / "askpass.sh"
    if not path.exists():
        secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(_ASKPASS)
        path.chmod(stat.S_IRWXU)
    return path


def _key_file(secrets_dir: Path, key: str) -> Path:
    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = secrets_dir / f"key-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(key if key.endswith("\n") else key + "\n")
    return path
