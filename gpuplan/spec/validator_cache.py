"""Compiled pydantic validators, kept between runs.

Building a model's validator is the largest single cost of a short gpuplan
run: pydantic generates the core schema for every nested model (~25 ms for
the fleet spec) and first imports its plugin loader, which scans every
installed distribution's entry points (~20 ms). The result, a core schema
plus config, is plain data with references to the models' own classes and
validator functions, so it is stored once and rebuilt by pydantic-core in
about 2 ms.

Safety: the file is a pickle, read with an unpickler that resolves no globals
but the empty-container types (``list``, ``dict``...) used as default factories.
The only other references it can make are persistent ids naming classes and
functions defined in the model's own module, checked by ``__module__`` and
``__qualname__``; anything else fails to load and the validator is built
normally. The file must be owned by the current user and not writable by
group or others. The cache key covers the model module's source, gpuplan,
pydantic, pydantic-core and the interpreter, so any change rebuilds.

Location: ``$GPUPLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuplan``, else
``~/.cache/gpuplan``. ``GPUPLAN_CACHE_DIR=""`` (empty) turns it off. Every
failure (read-only home, a corrupt or foreign file) falls back to the normal
build; the cache never changes a result, only how long it takes.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import pickle
import stat
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic_core import SchemaValidator

_FORMAT = b"gpuplan-validator-cache-1"
_KEEP = 4  # per model: several installed gpuplan versions can share one cache
_MAX_BYTES = 4 << 20
_SAFE_BUILTINS = {t.__name__: t for t in (list, dict, tuple, set, frozenset)}
_built: dict[type, "SchemaValidator"] = {}


def cache_dir() -> Path | None:
    """Where validators are kept; None when caching is off."""
    env = os.environ.get("GPUPLAN_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpuplan"


def cache_key(model: type) -> str | None:
    """Hash of everything the compiled validator depends on; None if the
    model's source cannot be read (then there is nothing safe to key on)."""
    import pydantic
    import pydantic_core

    import gpuplan

    source = getattr(sys.modules.get(model.__module__), "__file__", None)
    try:
        with open(source, "rb") as fh:  # type: ignore[arg-type]
            text = fh.read()
    except (OSError, TypeError):
        return None
    h = hashlib.sha256(_FORMAT)
    for part in (gpuplan.__version__, pydantic.VERSION, pydantic_core.__version__,
                 sys.implementation.cache_tag or "", model.__module__, model.__qualname__):
        h.update(b"\0" + str(part).encode())
    h.update(b"\0" + text)
    return h.hexdigest()[:32]


def validator(model: type["BaseModel"]) -> "SchemaValidator":
    """The model's compiled validator, from the cache when it holds a good one."""
    if model in _built:
        return _built[model]
    if model.__pydantic_complete__:
        return model.__pydantic_validator__  # type: ignore[return-value]
    where = cache_dir()
    key = cache_key(model) if where is not None else None
    path = where / f"{model.__qualname__}-{key}.pickle" if key else None  # type: ignore[operator]
    found = _load(path, model) if path is not None else None
    if found is None:
        model.model_rebuild()
        found = model.__pydantic_validator__  # type: ignore[assignment]
        if path is not None:
            _store(path, model, found)
    _built[model] = found  # type: ignore[assignment]
    return found  # type: ignore[return-value]


# --- restricted pickling ---------------------------------------------------------


def _own(obj: Any, module: str) -> str | None:
    """The qualified name of a class or function defined in `module`."""
    if isinstance(obj, (type, types.FunctionType, types.MethodType)) and getattr(obj, "__module__", None) == module:
        return obj.__qualname__
    return None


def _resolve(module: str, qualname: str) -> Any:
    """Walk a qualified name inside `module`, accepting only objects defined there."""
    obj: Any = sys.modules[module]
    for part in qualname.split("."):
        if not part or part.startswith("__"):
            raise pickle.UnpicklingError(f"refusing reference {qualname!r}")
        obj = getattr(obj, part)
        if _own(obj, module) is None:
            raise pickle.UnpicklingError(f"{qualname!r} is not defined in {module}")
    if obj.__qualname__ != qualname:
        raise pickle.UnpicklingError(f"{qualname!r} resolves to {obj.__qualname__!r}")
    return obj


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, module: str) -> None:
        super().__init__(file, protocol=5)
        self.module = module

    def persistent_id(self, obj: Any) -> str | None:
        return _own(obj, self.module)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, module: str) -> None:
        super().__init__(file)
        self.module = module

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _SAFE_BUILTINS:
            return _SAFE_BUILTINS[name]  # default_factory=list and the like
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a validator cache")

    def persistent_load(self, pid: Any) -> Any:
        if not isinstance(pid, str):
            raise pickle.UnpicklingError("persistent id must be a qualified name")
        return _resolve(self.module, pid)


def _without_metadata(node: Any) -> Any:
    """Drop core-schema ``metadata`` (JSON-schema hooks; pydantic-core ignores it
    when validating). Only schema nodes (a string ``type``) lose the key, so a
    model field called ``metadata`` stays."""
    if isinstance(node, dict):
        schema_node = isinstance(node.get("type"), str)
        return {k: _without_metadata(v) for k, v in node.items() if not (schema_node and k == "metadata")}
    if isinstance(node, (list, tuple)):
        return type(node)(_without_metadata(v) for v in node)
    return node


def dumps(args: tuple, module: str) -> bytes:
    """Pickle SchemaValidator's constructor arguments (schema, config, flags)."""
    buf = io.BytesIO()
    _Pickler(buf, module).dump((_without_metadata(args[0]), *args[1:]))
    return buf.getvalue()


def loads(data: bytes, module: str) -> tuple:
    args = _Unpickler(io.BytesIO(data), module).load()
    if not (isinstance(args, tuple) and args and isinstance(args[0], dict)
            and all(a is None or isinstance(a, (dict, bool)) for a in args[1:])):
        raise pickle.UnpicklingError("not SchemaValidator arguments")
    return args


def _load(path: Path, model: type) -> "SchemaValidator | None":
    from pydantic_core import SchemaValidator

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        trusted = (stat.S_ISREG(st.st_mode) and not st.st_mode & 0o022
                   and st.st_uid == getattr(os, "geteuid", lambda: st.st_uid)() and st.st_size <= _MAX_BYTES)
        if not trusted:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(_MAX_BYTES + 1)
        return SchemaValidator(*loads(data, model.__module__))
    except Exception:  # a stale or damaged cache is never an error, only a rebuild
        return None
    finally:
        os.close(fd)


def _store(path: Path, model: type, built: Any) -> None:
    from pydantic_core import SchemaValidator

    if type(built) is not SchemaValidator:
        return  # pydantic plugins wrap validators; honour them by not caching
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        data = dumps(built.__reduce__()[1], model.__module__)
        loads(data, model.__module__)  # only store what the restricted reader accepts
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        _prune(path.parent, model.__qualname__)
    except Exception:  # an unwritable cache costs time on the next run, nothing else
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _prune(where: Path, qualname: str) -> None:
    """Keep the newest few files per model; older keys are rarely read again."""
    files = sorted(where.glob(f"{qualname}-*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in files[_KEEP:]:
        old.unlink(missing_ok=True)
