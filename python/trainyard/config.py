"""The client config, found and read as the `trainyard` CLI does.

The CLI (src/cli/client.cc, src/security/client_config.cc) takes the server's
address from --server, else $TRAINYARD_SERVER, else the config's `server`,
else 127.0.0.1:7450; the token from $TRAINYARD_TOKEN, else the config's
`token`; the CA that the server's TLS certificate must be signed by from
--ca, else $TRAINYARD_CA_FILE, else the config's `caFile` (relative to the
config file). The config file is the one $TRAINYARD_CONFIG names (it must
exist), else .trainyard/client.yaml in the working directory (what
`trainyard up` writes), else ~/.config/trainyard/client.yaml. A config file
that belongs to another user, or that others may change, is refused: it
names the server the token goes to.
"""
from __future__ import annotations

import dataclasses
import os
import stat
from typing import Mapping, Optional

import yaml

from trainyard.errors import ConfigError

DEFAULT_SERVER = "127.0.0.1:7450"
_KEYS = ("server", "token", "caFile")


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """Where the server is and how to speak to it.

    Attributes:
        server: host:port of the server's client API.
        token: the user's token ("" = none: the server refuses most calls).
        ca_file: the CA certificate file that the server's certificate must be
            signed by ("" = the server is plaintext).
        path: the config file these came from ("" when none was read).
    """

    server: str = DEFAULT_SERVER
    token: str = ""
    ca_file: str = ""
    path: str = ""


def load_config_file(path: str) -> dict[str, str]:
    """Reads a client config file: its keys server, token and caFile.

    caFile is made absolute against the file's directory. Raises
    FileNotFoundError when the file does not exist and ConfigError, naming the
    file and the key, when it is not a config.
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        root = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if root is None:
        return {}
    if not isinstance(root, dict):
        raise ConfigError(f"{path}: expected keys server, token and caFile")
    out: dict[str, str] = {}
    for key, value in root.items():
        if key not in _KEYS:
            raise ConfigError(f'{path}: unknown key "{key}"; known keys: server, token, caFile')
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{path}: {key}: expected a string")
        value = "" if value is None else str(value)
        if key == "caFile" and value and not os.path.isabs(value):
            value = os.path.join(os.path.dirname(os.path.abspath(path)), value)
        out[key] = value
    return out


def _check_owner(path: str) -> None:
    st = os.stat(path)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise ConfigError(
            f"{path} is not used: it belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}), "
            f"or others may change it (mode {stat.S_IMODE(st.st_mode):04o}); "
            "set TRAINYARD_CONFIG to a config of your own")


def find_config_file(env: Mapping[str, str]) -> dict[str, str]:
    """The config file's keys, found as the CLI finds it; {} when there is none."""
    named = env.get("TRAINYARD_CONFIG", "")
    if named:
        try:
            return {**load_config_file(named), "path": named}
        except FileNotFoundError:
            raise ConfigError(f"TRAINYARD_CONFIG names {named}, which does not exist") from None
    places = [".trainyard/client.yaml"]
    if env.get("HOME"):
        places.append(os.path.join(env["HOME"], ".config/trainyard/client.yaml"))
    for place in places:
        if not os.path.exists(place):
            continue
        _check_owner(place)
        return {**load_config_file(place), "path": place}
    return {}


def resolve_config(server: Optional[str] = None, token: Optional[str] = None,
                   ca_file: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None) -> ClientConfig:
    """The config a client uses: each argument given wins, then the
    environment ($TRAINYARD_SERVER, $TRAINYARD_TOKEN, $TRAINYARD_CA_FILE), then
    the config file, then the defaults, exactly as the CLI decides.

    `env` defaults to os.environ. Raises ConfigError for a config file that
    cannot be used.
    """
    if env is None:
        env = os.environ
    need_file = not (server and token is not None and ca_file is not None)
    found: dict[str, str] = find_config_file(env) if need_file else {}
    if token is None:
        token = env.get("TRAINYARD_TOKEN", "") or found.get("token", "")
    if ca_file is None:
        ca_file = env.get("TRAINYARD_CA_FILE", "") or found.get("caFile", "")
    return ClientConfig(
        server=server or env.get("TRAINYARD_SERVER") or found.get("server") or DEFAULT_SERVER,
        token=token, ca_file=ca_file, path=found.get("path", ""))
