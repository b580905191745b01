"""Text artifacts from Jinja2 templates (node userData; never Kubernetes YAML).

The environment is sandboxed (a template cannot reach Python internals),
``StrictUndefined`` (a misspelt variable is an error, not an empty string),
autoescape off (the output is not HTML) and keeps the trailing newline.
Values that come from the spec are never spliced into structured text by
hand: YAML parts are rendered by ``gpuplan.render.yamlwriter`` before they
reach a template, and TOML strings go through the ``toml_str`` filter.

jinja2 is imported on first use only, so ``gpuplan validate`` never loads it.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

TEMPLATE_PACKAGE = "gpuplan.render"
TEMPLATE_DIR = "templates"


def toml_str(value: Any) -> str:
    """A TOML basic string (JSON string escapes are valid TOML escapes when
    only ASCII is emitted)."""
    if not isinstance(value, str):
        raise TypeError(f"toml_str expects a string, got {type(value).__name__}")
    return json.dumps(value, ensure_ascii=True)


def toml_value(value: Any) -> str:
    """A TOML scalar: bool, int or string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return toml_str(value)


def toml_key(key: str) -> str:
    """A TOML key: bare when it is made of A-Za-z0-9_-, quoted otherwise."""
    import re

    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_str(key)


@lru_cache(maxsize=1)
def environment() -> Any:
    from importlib import resources

    from jinja2 import DictLoader, StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    root = resources.files(TEMPLATE_PACKAGE).joinpath(TEMPLATE_DIR)
    templates = {
        entry.name: entry.read_text("utf-8")
        for entry in root.iterdir()
        if entry.name.endswith(".j2")
    }
    env = SandboxedEnvironment(
        loader=DictLoader(templates),
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["toml_str"] = toml_str
    env.filters["toml_value"] = toml_value
    env.filters["toml_key"] = toml_key
    return env


def render(template: str, **context: Any) -> str:
    """Render a packaged template (``gpuplan/render/templates/<template>``)."""
    return environment().get_template(template).render(**context)
