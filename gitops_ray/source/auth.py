"""Repository credentials, handed to git without ever landing in a URL, argv or log.

HTTPS tokens reach git through a credential helper given in the git process's
environment (``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``; the helper is a shell function
that prints two environment variables of the git process), so they never appear in
``.git/config``, in ``ps`` output or in error messages that echo the remote URL. The
environment of a process is readable only by its user (``/proc/<pid>/environ`` is mode
0400), unlike its argv. A helper rather than ``GIT_ASKPASS``: git hands an askpass program
its prompt on the command line, and the password prompt names the user
(``Password for 'https://<user>@host'``), which is the token when a forge takes the token
as the user name. Configured helpers are reset first, so ours is the only one asked.

A token written into an Application's ``repoURL`` (``https://user:token@host/repo``)
takes the same path: :func:`split_credentials` takes it out of the URL before git sees
the URL. SSH keys are passed with ``GIT_SSH_COMMAND -i <file>``; a key given as text
(e.g. from a Secret in an environment variable) is written once to a 0600 file in the
cache. Host keys are always checked:
against the given known-hosts file, or learnt on first use into the cache. Only git's
standard protocols are allowed, so a repository URL from an Application cannot run a
command through ``ext::``. :class:`Credentials` hides its secrets from ``repr`` so
printing settings cannot leak them.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

ENV_PREFIX = "GITOPS_RAY_GIT_"
# git's own protocols only: no ext:: (runs commands), fd::, or remote helpers from PATH.
ALLOWED_PROTOCOLS = "https:http:ssh:git:file"
USERNAME_VAR, PASSWORD_VAR = "GITOPS_RAY_CREDENTIAL_USERNAME", "GITOPS_RAY_CREDENTIAL_PASSWORD"
# git runs "!<text> get|store|erase" with sh; the credentials are read on stdin (ignored).
CREDENTIAL_HELPER = (f'!f() {{ test "$1" = get || exit 0; cat >/dev/null; '
                     f"printf 'username=%s\\npassword=%s\\n' \"${USERNAME_VAR}\" "
                     f'"${PASSWORD_VAR}"; }}; f')


@dataclass(frozen=True)
class Credentials:
    """How to authenticate to one repository (HTTPS token or SSH key)."""

    username: str = "git"
    token: str | None = field(default=None, repr=False)
    ssh_key_file: str | None = None
    ssh_key: str | None = field(default=None, repr=False)
    known_hosts_file: str | None = None
    ca_file: str | None = None  # Helm repositories and registries: CA bundle (PEM) to trust
    cert_file: str | None = None  # TLS client certificate (PEM) ...
    key_file: str | None = None  # ... and its key

    @property
    def password(self) -> str | None:
        """The token as a password (basic auth to a Helm repository or registry)."""
        return self.token

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Credentials | None:
        """``GITOPS_RAY_GIT_{USERNAME,TOKEN,SSH_KEY,SSH_KEY_FILE,KNOWN_HOSTS}``, if any."""
        env = os.environ if env is None else env
        values = {k: env.get(ENV_PREFIX + k) for k in
                  ("USERNAME", "TOKEN", "SSH_KEY", "SSH_KEY_FILE", "KNOWN_HOSTS")}
        if not any(values[k] for k in ("TOKEN", "SSH_KEY", "SSH_KEY_FILE", "KNOWN_HOSTS")):
            return None
        return cls(username=values["USERNAME"] or "git", token=values["TOKEN"],
                   ssh_key=values["SSH_KEY"], ssh_key_file=values["SSH_KEY_FILE"],
                   known_hosts_file=values["KNOWN_HOSTS"])


def split_credentials(url: str, found: Credentials | None) -> tuple[str, Credentials | None]:
    """The URL to hand git, and the credentials to use with it.

    For http(s), userinfo in ``url`` is removed and becomes the credentials (a user name
    alone keeps the password of ``found``, the configured credentials for the bare URL).
    For ssh the user name picks the remote account and stays; a password is dropped (SSH
    runs in batch mode with keys only). Other URLs are returned as they are.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc or parts.scheme not in ("http", "https", "ssh", "git+ssh"):
        return url, found
    userinfo, _, host = parts.netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if parts.scheme.endswith("ssh"):
        return urlunsplit(parts._replace(netloc=f"{user}@{host}")), found
    base = found or Credentials()
    token = unquote(password) if colon else (base.token or "")
    return (urlunsplit(parts._replace(netloc=host)),
            replace(base, username=unquote(user) or base.username, token=token))


def git_env(credentials: Credentials | None, secrets_dir: Path) -> dict[str, str]:
    """Environment for one git process: never prompts, authenticates as given."""
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false", "SSH_ASKPASS": "/bin/false",
           "GCM_INTERACTIVE": "never", "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS}
    creds = credentials or Credentials()
    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if creds.token is not None:
        env.update(credential_env(creds.username, creds.token))
    for name, value in (("GIT_SSL_CAINFO", creds.ca_file), ("GIT_SSL_CERT", creds.cert_file),
                        ("GIT_SSL_KEY", creds.key_file)):
        if value:
            env[name] = value  # HTTPS git with a private CA / a client certificate
    key_file = creds.ssh_key_file or (
        str(_key_file(secrets_dir, creds.ssh_key)) if creds.ssh_key else None)
    env["GIT_SSH_COMMAND"] = ssh_command(key_file, creds.known_hosts_file,
                                         learnt_hosts=secrets_dir / "known_hosts")
    return env


def credential_env(username: str, password: str) -> dict[str, str]:
    """Environment that makes our helper git's only credential helper, with its answer."""
    return {"GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": "credential.helper", "GIT_CONFIG_VALUE_0": "",  # reset
            "GIT_CONFIG_KEY_1": "credential.helper", "GIT_CONFIG_VALUE_1": CREDENTIAL_HELPER,
            USERNAME_VAR: _one_line(username), PASSWORD_VAR: _one_line(password)}


def _one_line(value: str) -> str:
    """The credential protocol is line based: a newline would end the value early."""
    return value.strip().splitlines()[0] if value.strip() else ""


def ssh_command(key_file: str | None, known_hosts: str | None, *,
                learnt_hosts: Path) -> str:
    """The ``GIT_SSH_COMMAND``: batch mode, only the given key, host keys checked.

    With ``known_hosts`` the host must be listed there; without, its key is learnt on first
    use into ``learnt_hosts`` (kept in the cache, never in the user's ``~/.ssh``) and
    checked on every later connection.
    """
    parts = ["ssh", "-o", "BatchMode=yes"]
    if key_file:
        parts += ["-i", key_file, "-o", "IdentitiesOnly=yes"]
    if known_hosts:
        parts += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    else:
        parts += ["-o", f"UserKnownHostsFile={learnt_hosts}",
                  "-o", "StrictHostKeyChecking=accept-new"]
    return shlex.join(parts)


def _key_file(secrets_dir: Path, key: str) -> Path:
    path = secrets_dir / f"key-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if not path.exists():
        write_private(path, key if key.endswith("\n") else key + "\n", mode=0o600)
    return path


def write_private(path: Path, text: str, *, mode: int) -> None:
    """Write ``text`` readable by this user only, atomically (threads may race here)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
