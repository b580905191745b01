"""Kubernetes name rules (k8s.io/apimachinery pkg/util/validation/validation.go:
IsDNS1123Label, IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue), one copy for
every stage that judges a name: the spec models, verify's Go validation of core
kinds, `verify-cluster` and `gpuplan import`.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Any

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")  # a label key's name part


def is_dns_label(v: Any) -> bool:
    return isinstance(v, str) and len(v) <= 63 and bool(DNS_LABEL.match(v))


def is_dns_subdomain(v: Any) -> bool:
    return isinstance(v, str) and len(v) <= 253 and bool(DNS_SUBDOMAIN.match(v))


def is_label_value(v: Any) -> bool:
    return isinstance(v, str) and len(v) <= 63 and bool(LABEL_VALUE.match(v))


def is_label_key(k: Any) -> bool:
    """``[prefix/]name``: a DNS subdomain prefix and a qualified name of at most 63."""
    if not isinstance(k, str):
        return False
    prefix, _, name = k.rpartition("/")
    return bool(0 < len(name) <= 63 and QUALIFIED_NAME.match(name)) and (not prefix or is_dns_subdomain(prefix))
