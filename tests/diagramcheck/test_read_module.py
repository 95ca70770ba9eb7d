"""``read_module`` on adversarial files (class-like text in strings and docstrings,
files that do not parse)."""

from __future__ import annotations

from scaffold.diagramcheck import python_reader

ADVERSARIAL = {
    "class in a docstring": (
        '"""Module.\n\nclass Fake(Enum):\n    A = 1\n"""\n\nclass Real:\n    x: int\n'
    ),
    "class in a function's string": (
        "def f():\n    return '''\nclass Fake:\n    a: int\n'''\n\n"
        "@dataclass\nclass Real:\n    b: int\n"
    ),
    "string quotes in comments": (
        "# a \"\"\" in a comment\nclass A:\n    x: int  # '''\n\nclass B(A):\n    y: str\n"
    ),
    "quotes in strings": (
        "X = \"'''\"\nclass A:\n    x: int\nY = '\"\"\"'\nclass B:\n    y: int\n"
    ),
    "decorators": (
        "import dataclasses\n\n@dataclasses.dataclass(\n    frozen=True,\n)\n@other\n"
        "class A:\n    x: int\n\n@dataclasses.dataclass\nclass B:\n    y: int\n"
    ),
    "bases on continuation lines": (
        "from pydantic import BaseModel\n\nclass A(\n    BaseModel,\n):\n    x: int\n\n"
        "class B(BaseModel,\nA):\n    y: int\n\nclass C(A, \\\nB):\n    z: int\n"
    ),
    "black-style signature": (
        "def f(\n    a: int,\n) -> int:\n    return a\n\n\nclass A:\n    x: int\n"
    ),
    "else at column 0": (
        "import sys\nif sys.version_info >= (3, 11):\n    class A:\n        x: int\n"
        "else:\n    class A:\n        y: int\ntry:\n    from enum import StrEnum\n"
        "except ImportError:\n    StrEnum = str\nfinally:\n    pass\n"
    ),
    "backslash continuation": ("Color = \\\nEnum\nx = 1 + \\\n2\nclass A(Color):\n    RED = 'r'\n"),
    "alias after use": (
        "from enum import Enum\nclass S(Enum):\n    A = 'a'\n    B = 'b'\n    C = 'c'\n"
        "T = {\n    (L.A, 'go'): L.B,\n    (L.B, 'go'): L.C,\n}\nL = S\n"
    ),
    "functional classes and tables in functions": (
        "from typing import NamedTuple, TypedDict\nfrom enum import Enum\n"
        "P = TypedDict('P', {'a': int,\n 'b': str})\nQ = NamedTuple('Q', [('x', int)])\n"
        "class S(Enum):\n    A = 1\n    B = 2\n\ndef rows():\n"
        "    table = [(S.A, S.B), (S.B, S.A)]\n    return table\n"
    ),
    "no newline at the end": "class A:\n    x: int",
    "indented first line": "  class A:\n    x: int\n",
    "nested brackets at column 0": "X = [\n(1,\n2),\n]\nclass A:\n    x: int\n",
    "syntax error in a function body": (
        "class A:\n    x: int\n\ndef f():\n    return (\n\nclass B:\n    y: int\n"
    ),
    "unterminated string": "class A:\n    x: int\n\nS = '''\nclass B:\n    y: int\n",
    "syntax error at the end": "class A:\n    x: int\n\ndef broken(:\n    pass\n",
    "decorator on nothing": "@dataclass\n\nx = 1\n",
    "NUL byte": "class A:\n    x: int\n\x00\n",
    "tabs": "class A:\n\tx: int\n",
    "CR line ends": "class A:\r\n    x: int\r\n",
    "a Machine": (
        "from transitions import Machine\nclass M:\n    def __init__(self):\n"
        "        self.m = Machine(model=self, states=['a', 'b'],\n"
        "            transitions=[['go', 'a', 'b']])\n"
    ),
    "match statement": (
        "match x:\n    case 1:\n        pass\n    case _:\n        pass\nclass A:\n    x: int\n"
    ),
}


def test_a_string_that_looks_like_a_class_is_not_read() -> None:
    info = python_reader.read_module(ADVERSARIAL["class in a function's string"])
    assert [c.name for c in info.classes] == ["Real"]
    assert info.classes[0].line == 8


def test_files_that_do_not_parse_give_an_error_and_nothing_else() -> None:
    for name in ("syntax error in a function body", "unterminated string", "NUL byte"):
        info = python_reader.read_module(ADVERSARIAL[name])
        assert info.error is not None, name
        assert info.classes == ()


def test_a_statemachine_self_transition_names_its_state() -> None:
    source = (
        "class M(StateMachine):\n    idle = State(initial=True)\n    busy = State()\n"
        "    go = idle.to(busy)\n    stay = busy.to.itself(internal=True)\n"
    )
    [cls] = python_reader.read_module(source).classes
    assert [(t.source, t.event, t.target) for t in cls.transitions] == [
        ("idle", "go", "busy"),
        ("busy", "stay", "busy"),
    ]
