"""What a person types, checked the one way (the CLI's options, a notebook's arguments): KEY=VALUE
lists (--set, --var), idempotency keys, label selectors and regions. Each bad value is one UserError (exit
2) naming it and the fix, before anything is loaded, built or sent."""

from __future__ import annotations

from vertex_trainer.vertex import names

__all__ = ["check_key", "check_region", "parse_assignments", "parse_label"]


def parse_assignments(items: list[str] | tuple[str, ...] | None, flag: str) -> list[tuple[str, str]]:
    """'a.b=c' strings as (key, value) pairs, in order.

    Args:
        items: the strings, e.g. the values of a repeated ``--var`` (None: none).
        flag: the option they came from, named in the error ("--set", "--var").

    Returns:
        [(key, value)], keys stripped, values verbatim.

    Raises:
        UserError: an item has no '=' or an empty key.
    """
    # the spec package loads its models: `list --label` and `cancel` load none
    from vertex_trainer.spec import parse_assignments as parse

    return parse(items, flag)


def check_key(key: str) -> str:
    """An idempotency key, checked before anything is sent (it becomes a Vertex AI label value).

    Args:
        key: the key (``--idempotency-key``).

    Returns:
        the key, unchanged.

    Raises:
        UserError: not 1-63 lowercase letters, digits, '_' or '-', or ending in '-' or '_' (an
            unexpanded ``cb-${COMMIT_SHA}``).
    """
    return names.check_key(key)


def parse_label(text: str) -> tuple[str, str]:
    """A KEY=VALUE label selector (``list --label``).

    Args:
        text: the selector.

    Returns:
        (key, value).

    Raises:
        UserError: not KEY=VALUE of lowercase letters, digits, '_' or '-' (keys start with a letter).
    """
    return names.parse_label(text)


def check_region(region: str, flag: str = "--region") -> str:
    """A region a command is pointed at, checked before anything is sent, as a spec's region is:
    one of the Vertex AI training regions of the table (regions.py).

    Args:
        region: the region (``--region``, or the default one).
        flag: where it was given, named in the error.

    Returns:
        the region, unchanged.

    Raises:
        UserError: not a region of the table (``mars-central1``, ``us-centrl1``), naming the
            nearest ones.
    """
    return names.check_region(region, flag)
