"""Per-attribute ℓ (P0's sensitivity coefficients, SPEC §6.7): one requirement ℓ_i per sensitive attribute.

A requirement is either one integer ℓ for every sensitive attribute (P1) or a mapping attribute -> ℓ_i (P0,
"Rating: privacy preservation for multiple attributes with different sensitivity requirements", ICDMW 2011).
Rating builds the SIDs of attribute i with at least ℓ_i distinct values; SAC~ groups have size
L = max ℓ_i (with L distinct values on every attribute, hence at least ℓ_i on attribute i).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["EllRequirement", "ell_by_attribute", "group_size", "is_uniform"]

#: One ℓ for every sensitive attribute, or one ℓ_i per attribute.
EllRequirement = int | Mapping[str, int]


def ell_by_attribute(ell: EllRequirement, sensitive_attributes: Sequence[str]) -> dict[str, int]:
    """ℓ_i of every sensitive attribute, in schema order.

    Parameters
    ----------
    ell
        An integer ℓ >= 2 (the same for every attribute) or a mapping attribute name -> integer ℓ_i >= 2 naming
        exactly the sensitive attributes.
    sensitive_attributes
        The sensitive attribute names, schema order.

    Returns
    -------
    dict[str, int]
        attribute -> ℓ_i, keys in the order of ``sensitive_attributes``.

    Raises
    ------
    ValueError
        ℓ (or some ℓ_i) not an integer >= 2, a sensitive attribute without ℓ_i, or an ℓ_i for a name that is not a
        sensitive attribute (the message names the attribute).
    """
    if isinstance(ell, Mapping):
        missing = [a for a in sensitive_attributes if a not in ell]
        if missing:
            raise ValueError(f"no ℓ for sensitive attribute(s) {missing}: give every sensitive attribute its ℓ_i")
        unknown = [a for a in ell if a not in sensitive_attributes]
        if unknown:
            raise ValueError(
                f"ℓ given for {unknown}, which is not a sensitive attribute (sensitive attributes: {list(sensitive_attributes)})"
            )
        result = {a: ell[a] for a in sensitive_attributes}
    else:
        result = dict.fromkeys(sensitive_attributes, ell)
    for attribute, value in result.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise ValueError(f"ℓ of sensitive attribute {attribute!r} must be an integer >= 2, got {value!r}")
    return result


def group_size(ell: EllRequirement) -> int:
    """L: ℓ itself, or max ℓ_i of a mapping (the size of every SAC~ group, SPEC §6.7).

    Raises
    ------
    ValueError
        An empty mapping.
    """
    if isinstance(ell, Mapping):
        if not ell:
            raise ValueError("an empty per-attribute ℓ mapping has no group size")
        return max(int(v) for v in ell.values())
    return int(ell)


def is_uniform(ell: EllRequirement) -> bool:
    """Whether every attribute has the same ℓ (an integer, or a mapping with one value)."""
    return not isinstance(ell, Mapping) or len(set(ell.values())) <= 1
