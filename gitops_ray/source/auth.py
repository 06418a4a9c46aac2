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

**Scope.** Credentials are for a URL prefix (:attr:`Credentials.scope`), matched on a path
boundary (:func:`in_scope`: ``https://git.example/team`` covers ``.../team/app`` and
``.../team.git``, never ``.../team-evil``). The ``GITOPS_RAY_GIT_*`` variables are for the
prefix ``GITOPS_RAY_GIT_URL`` names, else for the host of the repository the command was
given (``--repo``), and for nothing when neither is known (:func:`env_lookup`). A repository
URL an Application names cannot widen that: git asks our helper for credentials with the
protocol, host and path of the server that answered 401 (``credential.useHttpPath``), and
the helper answers only when all three are the ones it was given (so a redirect to another
host, or to a path outside the scope, is not answered either).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

ENV_PREFIX = "GITOPS_RAY_GIT_"
# git's own protocols only: no ext:: (runs commands), fd::, or remote helpers from PATH.
ALLOWED_PROTOCOLS = "https:http:ssh:git:file"
SCOPE_VAR = ENV_PREFIX + "URL"
USERNAME_VAR, PASSWORD_VAR = "GITOPS_RAY_CREDENTIAL_USERNAME", "GITOPS_RAY_CREDENTIAL_PASSWORD"
PROTOCOL_VAR, HOST_VAR, PATH_VAR = ("GITOPS_RAY_CREDENTIAL_PROTOCOL", "GITOPS_RAY_CREDENTIAL_HOST",
                                    "GITOPS_RAY_CREDENTIAL_PATH")
# git runs "!<text> get|store|erase" with sh and writes protocol=, host=, path= lines on
# stdin. The helper answers only for the protocol and host it was given, and a path equal
# to, or below, its path (with or without ".git"); else it prints nothing (git then fails
# with "could not read Username": prompts are off).
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || exit 0; p=; h=; r=; '
    'while IFS= read -r l; do case "$l" in protocol=*) p="${l#protocol=}";; '
    'host=*) h="${l#host=}";; path=*) r="${l#path=}";; esac; done; '
    f'test "$p" = "${PROTOCOL_VAR}" && test "$h" = "${HOST_VAR}" || exit 0; '
    f'if test -n "${PATH_VAR}"; then case "$r" in "${PATH_VAR}"|"${PATH_VAR}".git|'
    f'"${PATH_VAR}"/*) ;; *) exit 0;; esac; fi; '
    f"printf 'username=%s\\npassword=%s\\n' \"${USERNAME_VAR}\" \"${PASSWORD_VAR}\"; }}; f")


@dataclass(frozen=True)
class Credentials:
    """How to authenticate to one repository (HTTPS token or SSH key)."""

    username: str = "git"
    token: str | None = field(default=None, repr=False)
    ssh_key_file: str | None = None
    ssh_key: str | None = field(default=None, repr=False)
    known_hosts_file: str | None = None
    scope: str = ""
    """The URL prefix these are for (see :func:`in_scope`); "" for the one URL they were
    looked up for."""
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
    bare = urlunsplit(parts._replace(netloc=host))
    return bare, replace(base, username=unquote(user) or base.username, token=token,
                         scope="" if colon else base.scope)


def git_env(credentials: Credentials | None, secrets_dir: Path, url: str = ""
            ) -> dict[str, str]:
    """Environment for one git process talking to ``url``: never prompts, authenticates as given.

    A token is answered only for ``url``'s host, and a path in the credentials' scope.
    """
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false", "SSH_ASKPASS": "/bin/false",
           "GCM_INTERACTIVE": "never", "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS}
    creds = credentials or Credentials()
    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if creds.token is not None:
        env.update(credential_env(creds.username, creds.token, helper_target(url, creds.scope)))
    for name, value in (("GIT_SSL_CAINFO", creds.ca_file), ("GIT_SSL_CERT", creds.cert_file),
                        ("GIT_SSL_KEY", creds.key_file)):
        if value:
            env[name] = value  # HTTPS git with a private CA / a client certificate
    key_file = creds.ssh_key_file or (
        str(_key_file(secrets_dir, creds.ssh_key)) if creds.ssh_key else None)
    env["GIT_SSH_COMMAND"] = ssh_command(key_file, creds.known_hosts_file,
                                         learnt_hosts=secrets_dir / "known_hosts")
    return env


def credential_env(username: str, password: str, target: tuple[str, str, str]
                   ) -> dict[str, str]:
    """Environment that makes our helper git's only credential helper, with its answer.

    It answers for ``target`` (protocol, host, path prefix: :func:`helper_target`) only.
    """
    protocol, host, path = target
    return {"GIT_CONFIG_COUNT": "3",
            "GIT_CONFIG_KEY_0": "credential.helper", "GIT_CONFIG_VALUE_0": "",  # reset
            "GIT_CONFIG_KEY_1": "credential.helper", "GIT_CONFIG_VALUE_1": CREDENTIAL_HELPER,
            "GIT_CONFIG_KEY_2": "credential.useHttpPath", "GIT_CONFIG_VALUE_2": "true",
            PROTOCOL_VAR: _one_line(protocol), HOST_VAR: _one_line(host),
            PATH_VAR: _one_line(path),
            USERNAME_VAR: _one_line(username), PASSWORD_VAR: _one_line(password)}


def helper_target(url: str, scope: str) -> tuple[str, str, str]:
    """What the helper answers for: the protocol, host and path prefix git must ask about.

    ``url``'s protocol and host as git reports them, and the path of ``scope`` (``url``'s
    own path when there is no scope), decoded, without slashes at the ends, as git's
    ``path=``. A ``url`` outside ``scope``, or empty, matches nothing git asks.
    """
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc or (scope and not in_scope(url, scope)):
        return "-", "-", "-"
    path = urlsplit(scope).path if scope else parts.path
    return (parts.scheme.lower(), unquote(parts.netloc.rpartition("@")[2]),
            unquote(path).strip("/"))


# -- scope ---------------------------------------------------------------------------


def _key(url: str) -> tuple[str, str, list[str]] | None:
    """(scheme, host[:port] without default port, path segments without ``.git``) of ``url``.

    scp-like SSH (``git@host:org/repo``) is read as ``ssh://git@host/org/repo``; a URL
    without scheme or host (a local path) has no key.
    """
    if "://" not in url and ":" in url.split("/", 1)[0]:
        host, _, path = url.partition(":")
        url = f"ssh://{host}/{path}"
    parts = urlsplit(url)
    scheme = {"git+ssh": "ssh"}.get(parts.scheme.lower(), parts.scheme.lower())
    try:
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        return None
    if port is not None and port != {"https": 443, "http": 80, "ssh": 22}.get(scheme):
        host = f"{host}:{port}"
    segments = [unquote(s) for s in parts.path.split("/") if s]
    if segments and segments[-1].endswith(".git"):
        segments[-1] = segments[-1][:-4]
    return scheme, host, segments


def in_scope(url: str, prefix: str) -> bool:
    """Whether ``url`` is ``prefix`` or below it, on a path boundary.

    Scheme, host and port must be equal (host case-insensitively, a default port is the
    same as none); then every path segment of ``prefix`` must be the segment of ``url`` at
    its place, so ``https://h/team`` covers ``https://h/team/app.git`` and
    ``https://h/team.git``, and not ``https://h/team-evil``. User names are ignored.
    """
    have, want = _key(url), _key(prefix)
    if have is None or want is None or have[:2] != want[:2]:
        return False
    return have[2][:len(want[2])] == want[2]


def host_scope(url: str) -> str:
    """The prefix naming ``url``'s whole host (``https://git.example:8443/``); "" if none."""
    key = _key(url)
    return f"{key[0]}://{key[1]}/" if key is not None else ""


EnvLookup = Callable[[str], "Credentials | None"]


def env_lookup(repos: Iterable[str] = (), env: Mapping[str, str] | None = None) -> EnvLookup:
    """``url -> Credentials | None``: the ``GITOPS_RAY_GIT_*`` credentials, for their scope.

    The scope is ``GITOPS_RAY_GIT_URL`` when set, else the hosts of ``repos`` (the
    repositories the command or the settings name: ``--repo``, ``appSources``); with
    neither, the secrets are for no URL at all. ``GITOPS_RAY_GIT_KNOWN_HOSTS`` (not a
    secret) pins host keys for every URL.
    """
    env = os.environ if env is None else env
    found = Credentials.from_env(env)
    given = (env.get(SCOPE_VAR) or "").strip()
    scopes = tuple(s for s in ([given] if given else [host_scope(r) for r in repos]) if s)

    # Known hosts are not a secret: they pin host keys for every URL.
    public = (Credentials(known_hosts_file=found.known_hosts_file)
              if found is not None and found.known_hosts_file else None)

    def lookup(url: str) -> Credentials | None:
        scope = next((s for s in scopes if in_scope(url, s)), None)
        return public if found is None or scope is None else replace(found, scope=scope)
    return lookup


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
