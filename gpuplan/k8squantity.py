"""Kubernetes resource quantities (``500m``, ``2Ti``, ``1e3``): their value, and the canonical
form the API server writes back (k8s.io/apimachinery@v0.36.3 pkg/api/resource/quantity.go
``ParseQuantity``, ``CanonicalizeBytes``).

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?")
_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
           "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "": 1, "k": 10 ** 3,
           "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}


def parse(v: Any) -> Fraction | None:
    """The value of a quantity (string or JSON number), or None when it does not parse."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, float):
        return Fraction(v).limit_denominator(10 ** 9)
    if not isinstance(v, str) or len(v) > 64:
        return None
    m = _QUANTITY.fullmatch(v)
    if not m:
        return None
    suffix = m[2] or ""
    if suffix[:1] in ("e", "E") and suffix not in _SUFFIX:
        exp = int(suffix[1:])
        if abs(exp) > 30:
            return None
        return Fraction(m[1]) * Fraction(10) ** exp
    return Fraction(m[1]) * _SUFFIX[suffix]


def binary(n: int) -> str:
    """Bytes as the API server writes the quantity back (canonical form: the largest binary suffix
    that divides it, ``2097152Mi`` -> ``2Ti``), so that ``kubectl get`` shows what was written."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = 2 ** (10 * ("KMGTPE".index(suffix[0]) + 1))
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def cores(milli: int) -> str:
    """Thousandths of a CPU as the API server writes them back: ``24``, ``7500m``."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
