"""The fenced blocks of a markdown file (```lang … ```), with the line each opens on."""

from __future__ import annotations

import re
from typing import NamedTuple

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


class Block(NamedTuple):
    line: int  # 1-based line of the opening fence
    lang: str  # the info string's first word, lower-cased ("" when none)
    text: str  # the lines between the fences, each ending in a newline


def fenced_blocks(markdown: str) -> list[Block]:
    """Every fenced code block, in order. An unclosed fence runs to the end (as CommonMark reads it)."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, info = opening["fence"], opening["info"].strip()
        lang = info.split()[0].lower() if info else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence) \
                    and not closing["info"].strip():
                break
            body.append(lines[j] + "\n")
            j += 1
        blocks.append(Block(i + 1, lang, "".join(body)))
        i = j + 1
    return blocks
