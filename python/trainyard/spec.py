"""Job specs as the SDK takes them: a mapping, YAML text or a YAML file.

The server reads the spec's YAML and checks every field (docs/job-spec.md);
here only what must hold before it can be sent is checked: the spec is a
mapping with string keys, and YAML text parses. The server's own problems come
back as a SpecError naming each field.
"""
from __future__ import annotations

import os
import pathlib
from typing import Any, Mapping, Union

import yaml

from trainyard.errors import SpecError

# A spec: a mapping (as YAML would give it), YAML text, or the path of a
# YAML file (a pathlib.Path or other os.PathLike; a plain str is YAML text).
Spec = Union[Mapping[str, Any], str, "os.PathLike[str]"]


def _check_keys(value: Any, path: str) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SpecError([f"{path or 'spec'}: key {key!r} is a {type(key).__name__}, not a string"])
            _check_keys(item, f"{path}.{key}" if path else key)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_keys(item, f"{path}[{i}]")


def spec_to_yaml(spec: Spec) -> str:
    """The YAML text of `spec`, ready to submit.

    Raises SpecError when it is not a mapping, has a key that is not a
    string, or is YAML text that does not parse; FileNotFoundError for a
    path that does not exist.
    """
    if isinstance(spec, os.PathLike):
        return spec_to_yaml(pathlib.Path(spec).read_text(encoding="utf-8"))
    if isinstance(spec, str):
        try:
            parsed = yaml.safe_load(spec)
        except yaml.YAMLError as e:
            raise SpecError([f"spec: not valid YAML: {e}"]) from None
        if not isinstance(parsed, Mapping):
            raise SpecError([f"spec: expected a mapping (name, replicas, ...), got {type(parsed).__name__}"])
        return spec
    if isinstance(spec, Mapping):
        _check_keys(spec, "")
        try:
            text: str = yaml.safe_dump(dict(spec), sort_keys=False)
            return text
        except yaml.representer.RepresenterError as e:
            raise SpecError([f"spec: a value cannot be written as YAML: {e.args[1]!r}"]) from None
    raise SpecError([f"spec: expected a mapping, YAML text or a path, got {type(spec).__name__}"])
