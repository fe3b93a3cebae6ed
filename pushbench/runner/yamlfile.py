"""The strict YAML reading of experiment files: ``yaml.safe_load`` plus two refusals.

* a key given twice in one mapping (YAML keeps the last silently): refused with both line
  numbers; a merge key (``<<: *base``) may still be overridden, which is what merging means;
* an integer of more than :data:`MAX_INT_DIGITS` digits: Python's ``int`` raises a ValueError
  traceback past 4,300 digits, and no seed, count or budget needs 20 (int64 has 19).

Both raise :class:`Refused`; the caller words it with the file's path (one line).
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_INT_DIGITS = 20


class Refused(Exception):
    """A document PushBench will not read; the message says where and why (one line)."""


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (YAML would keep the
    last silently) and an integer of more than :data:`MAX_INT_DIGITS` digits (Python's ``int``
    would raise a ValueError traceback past 4,300); each with its line numbers."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base` keys may be overridden; that is what merge means
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                    seen.setdefault(key, line)
                except TypeError:
                    continue  # an unhashable key: the base loader reports it
                if first is not None:
                    raise Refused(
                        f"duplicate key {str(key)[:60]!r} at lines {first} and "
                        f"{line} (YAML would keep only the last; remove one)"
                    )
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise Refused(
                f"line {node.start_mark.line + 1}: an integer of {digits} digits; "
                f"numbers here (seeds, counts, budgets) have at most "
                f"{MAX_INT_DIGITS - 1}"
            )
        return super().construct_yaml_int(node)


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)


def strict_yaml(text: str) -> Any:
    """The YAML document in ``text`` (safe types only), or :class:`Refused`."""
    return yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass
