"""Render YAML values the way Backlog.md writes its task frontmatter.

Backlog.md serialises frontmatter with gray-matter, which calls js-yaml 3
``safeDump`` with default options (indent 2, lineWidth 80, compat mode). To
write files the real tool would write byte for byte, and to rewrite a single
frontmatter line without re-dumping the whole mapping, scaffold needs the same
choice of scalar style (plain, 'single', "double", ``|-`` literal or ``>-``
folded), so this module ports that choice and the folding rules.

All lengths are counted like JavaScript does (UTF-16 code units); characters
outside the Basic Multilingual Plane are surrogate pairs, which js-yaml treats
as unprintable and therefore double-quotes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

INDENT = 2
LINE_WIDTH = 80


def _cased(*words: str) -> frozenset[str]:
    """Each word in lower, Capitalised and UPPER case, as YAML's core schemas spell them."""
    return frozenset(f(w) for w in words for f in (str.lower, str.capitalize, str.upper))


# Quoted in compat mode because YAML 1.1 would read them as booleans.
_COMPAT_WORDS = _cased("y", "yes", "on", "n", "no", "off")
# Plain words safeLoad reads as null, a boolean or a merge key.
_NOT_STRINGS = _cased("null", "true", "false") | {"~", "<<"}

# js-yaml's escape sequences: each character and the letter after its backslash.
_ESCAPES = {
    ord(ch): "\\" + letter
    for ch, letter in zip(
        '\0\a\b\t\n\v\f\r\x1b"\\\x85\xa0\u2028\u2029', '0abtnvfre"\\N_LP', strict=True
    )
}

_FLOW_INDICATORS = frozenset(",[]{}")
_FIRST_UNSAFE = frozenset("-?:,[]{}#&*!|=>'\"%@`")

_FLOAT = re.compile(
    r"^(?:[-+]?(?:0|[1-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"
    r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*"
    r"|[-+]?\.(?:inf|Inf|INF)"
    r"|\.(?:nan|NaN|NAN))$"
)
_DATE = re.compile(r"^([0-9][0-9][0-9][0-9])-([0-9][0-9])-([0-9][0-9])$")
_TIMESTAMP = re.compile(
    r"^([0-9][0-9][0-9][0-9])-([0-9][0-9]?)-([0-9][0-9]?)"
    r"(?:[Tt]|[ \t]+)([0-9][0-9]?):([0-9][0-9]):([0-9][0-9])"
    r"(?:\.([0-9]*))?(?:[ \t]*(Z|([-+])([0-9][0-9]?)(?::([0-9][0-9]))?))?$"
)
# js-yaml's YAML 1.1 integers: binary, hex, octal, decimal and base 60, "_" between digits.
_INT = re.compile(
    r"[-+]?(?:0|0b[01_]*[01]|0x[0-9a-fA-F_]*[0-9a-fA-F]|0[0-7_]*[0-7]"
    r"|[1-9](?:[0-9_]*[0-9])?|[1-9][0-9_]*(?::[0-5]?[0-9])+)"
)


def _utf16_units(value: str) -> list[int]:
    """The string as JavaScript sees it: UTF-16 code units."""
    data = value.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _is_printable(c: int) -> bool:
    return (
        0x20 <= c <= 0x7E
        or (0xA1 <= c <= 0xD7FF and c not in (0x2028, 0x2029))
        or (0xE000 <= c <= 0xFFFD and c != 0xFEFF)
        or 0x10000 <= c <= 0x10FFFF
    )


def _is_whitespace(c: int) -> bool:
    return c in (0x20, 0x09)


def _is_ns_char(c: int) -> bool:
    return _is_printable(c) and not _is_whitespace(c) and c not in (0xFEFF, 0x0D, 0x0A)


def _is_plain_safe(c: int, prev: int | None) -> bool:
    if not _is_printable(c) or c in (0xFEFF, 0x3A):  # BOM, ':'
        return False
    if c < 0x80 and chr(c) in _FLOW_INDICATORS:
        return False
    return c != 0x23 or (prev is not None and _is_ns_char(prev))  # '#'


def _is_plain_safe_first(c: int) -> bool:
    if not _is_printable(c) or c == 0xFEFF or _is_whitespace(c):
        return False
    return not (c < 0x80 and chr(c) in _FIRST_UNSAFE)


def _is_ambiguous(data: str) -> bool:
    """True when safeLoad would read ``data`` back as something other than a string."""
    return (
        data in _NOT_STRINGS
        or bool(_INT.fullmatch(data))
        or (bool(_FLOAT.match(data)) and not data.endswith("_"))
        or bool(_DATE.match(data) or _TIMESTAMP.match(data))
    )


def _choose_style(value: str, line_width: int) -> str:
    units = _utf16_units(value)
    plain = _is_plain_safe_first(units[0]) and not _is_whitespace(units[-1])
    has_line_break = False
    has_foldable_line = False
    previous_line_break = -1
    prev: int | None = None
    for i, c in enumerate(units):
        if c == 0x0A:
            has_line_break = True
            has_foldable_line = has_foldable_line or (
                i - previous_line_break - 1 > line_width and units[previous_line_break + 1] != 0x20
            )
            previous_line_break = i
        elif not _is_printable(c):
            return "double"
        plain = plain and _is_plain_safe(c, prev)
        prev = c
    end = len(units)
    has_foldable_line = has_foldable_line or (
        end - previous_line_break - 1 > line_width
        and previous_line_break + 1 < end
        and units[previous_line_break + 1] != 0x20
    )
    if not has_line_break and not has_foldable_line:
        return "plain" if plain and not _is_ambiguous(value) else "single"
    return "folded" if has_foldable_line else "literal"


def _escape_double(value: str) -> str:
    out: list[str] = []
    for ch in value:
        c = ord(ch)
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif _is_printable(c) and c < 0x10000:
            out.append(ch)
        elif c <= 0xFF:
            out.append(f"\\x{c:02X}")
        elif c <= 0xFFFF:
            out.append(f"\\u{c:04X}")
        else:
            out.append(f"\\U{c:08X}")
    return "".join(out)


def _block_header(value: str) -> str:
    indicator = str(INDENT) if re.match(r"^\n* ", value) else ""
    clip = value.endswith("\n")
    keep = clip and (value.endswith("\n\n") or value == "\n")
    chomp = "+" if keep else ("" if clip else "-")
    return f"{indicator}{chomp}\n"


def _indent_lines(value: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(
        pad + line if line and line != "\n" else line for line in value.splitlines(keepends=True)
    )


def _fold_line(line: str, width: int) -> str:
    if line == "" or line[0] == " ":
        return line
    start = 0
    curr = 0
    result = ""
    for match in re.finditer(r" (?=[^ ])", line):
        nxt = match.start()
        if _js_len(line, start, nxt) > width:
            end = curr if curr > start else nxt
            result += "\n" + line[start:end]
            start = end + 1
        curr = nxt
    result += "\n"
    if _js_len(line, start, len(line)) > width and curr > start:
        result += line[start:curr] + "\n" + line[curr + 1 :]
    else:
        result += line[start:]
    return result[1:]


def _js_len(value: str, start: int, end: int) -> int:
    return len(value[start:end].encode("utf-16-le", "surrogatepass")) // 2


def _fold_string(value: str, width: int) -> str:
    first_lf = value.find("\n")
    first_lf = first_lf if first_lf != -1 else len(value)
    result = _fold_line(value[:first_lf], width)
    prev_more_indented = value[:1] in ("\n", " ")
    for match in re.finditer(r"(\n+)([^\n]*)", value[first_lf:]):
        prefix, line = match.group(1), match.group(2)
        more_indented = line[:1] == " "
        result += prefix
        if not prev_more_indented and not more_indented and line != "":
            result += "\n"
        result += _fold_line(line, width)
        prev_more_indented = more_indented
    return result


def dump_string(value: str, level: int = 1) -> str:
    """Render ``value`` as js-yaml 3 ``safeDump`` would at nesting ``level``.

    ``level`` 1 is a value of the top-level mapping (``title: ...``), 2 an item
    of a list under a top-level key. Block styles come back as ``>-\\n  ...``,
    ready to follow ``key: ``.
    """
    if value == "":
        return "''"
    if value in _COMPAT_WORDS:
        return f"'{value}'"
    indent = INDENT * max(1, level)
    width = max(min(LINE_WIDTH, 40), LINE_WIDTH - indent)
    style = _choose_style(value, width)
    if style == "plain":
        return value
    if style == "single":
        return "'" + value.replace("'", "''") + "'"
    if style == "literal":
        return "|" + _block_header(value) + _indent_lines(value, indent).removesuffix("\n")
    if style == "folded":
        folded = _fold_string(value, width)
        return ">" + _block_header(value) + _indent_lines(folded, indent).removesuffix("\n")
    return '"' + _escape_double(value) + '"'


def dump_key_value(key: str, value: str | int | float | Sequence[str]) -> str:
    """One top-level frontmatter entry, with its trailing newline."""
    if isinstance(value, str):
        return f"{key}: {dump_string(value, 1)}\n"
    if isinstance(value, int | float):  # like JavaScript's String(n): 2000.0 is "2000"
        number = int(value) if isinstance(value, float) and value.is_integer() else value
        return f"{key}: {number}\n"
    if not value:
        return f"{key}: []\n"
    lines = "".join(f"\n{' ' * INDENT}- {dump_string(item, 2)}" for item in value)
    return f"{key}:{lines}\n"
