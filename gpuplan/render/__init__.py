"""Rendering: objects → file text.

``gpuplan.render.yamlwriter`` is the one deterministic YAML writer for every
manifest; ``gpuplan.render.text`` renders text artifacts (sandboxed Jinja2).

Stage: foundation (docs/architecture.md)."""

from gpuplan.render.yamlwriter import dump, dump_bytes, dump_documents, dump_documents_bytes

__all__ = ["dump", "dump_bytes", "dump_documents", "dump_documents_bytes"]
