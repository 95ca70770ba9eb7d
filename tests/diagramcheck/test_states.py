"""States -> the state diagram: state Enums, transition tables, machines, Mermaid sources."""

from __future__ import annotations

from dcrepo import ARCH, DATA, STATES, Repo, kinds, mermaid_doc

ORDER_STATE = (
    "from enum import Enum\n\n\nclass OrderState(Enum):\n"
    "    NEW = 'new'\n    PAID = 'paid'\n{extra}"
)


def _states(body: str) -> str:
    return mermaid_doc("stateDiagram-v2\n" + body, "States")


def test_state_enum_added_and_removed_member(repo: Repo) -> None:
    repo.write("app/pkg/orders.py", ORDER_STATE.format(extra="    SHIPPED = 'shipped'\n"))
    repo.write(ARCH, mermaid_doc("flowchart LR\n  pkg.orders"))
    repo.write(STATES, _states("  [*] --> new\n  new --> paid\n  paid --> shipped"))
    base = repo.commit("orders")

    repo.write("app/pkg/orders.py", ORDER_STATE.format(extra="    CANCELLED = 'cancelled'\n"))
    repo.commit("cancel instead of ship")
    report = repo.check(base)
    assert kinds(report) == [("state-added", "CANCELLED"), ("state-removed", "SHIPPED")]
    assert all(f.diagram == STATES for f in report.failures)
    added = next(f for f in report.failures if f.kind == "state-added")
    assert added.line == 7
    assert "not updated in this change" in added.message
    removed = next(f for f in report.failures if f.kind == "state-removed")
    assert removed.line == 7  # the old file's line
    assert removed.message.startswith("remove state `SHIPPED`")

    # Adding the new state is not enough: the removed one must go.
    repo.write(
        STATES, _states("  [*] --> new\n  new --> paid\n  paid --> shipped\n  paid --> cancelled")
    )
    repo.commit("half fix")
    assert kinds(repo.check(base)) == [("state-removed", "SHIPPED")]
    repo.write(STATES, _states("  [*] --> new\n  new --> paid\n  paid --> cancelled"))
    repo.commit("fix")
    assert not repo.check(base).blocking


def test_state_enum_goes_to_the_state_diagram_not_the_data_model(repo: Repo) -> None:
    report = repo.change(
        {
            "app/pkg/jobs.py": "import enum\n\n\nclass JobStatus(enum.Enum):\n    QUEUED = 1\n    DONE = 2\n",
            ARCH: mermaid_doc("flowchart LR\n  pkg.jobs"),
        }
    )
    assert {f.diagram for f in report.failures} == {STATES}
    assert kinds(report) == [("state-added", "DONE"), ("state-added", "QUEUED")]


TABLE = """\
from enum import Enum


class Phase(Enum):
    IDLE = "Idle"
    RUNNING = "Running"
    STOPPED = "Stopped"


class Ev(Enum):
    START = "start"
    STOP = "stop"
    RESET = "reset"


P = Phase
TABLE = {{
    (P.IDLE, Ev.START): P.RUNNING,
    (P.RUNNING, Ev.STOP): P.STOPPED,
{extra}}}
"""


def test_transition_table_change(repo: Repo) -> None:
    repo.write("app/pkg/machine.py", TABLE.format(extra=""))
    repo.write(ARCH, mermaid_doc("flowchart LR\n  pkg.machine"))
    repo.write(STATES, _states("  Idle --> Running : start\n  Running --> Stopped : stop"))
    base = repo.commit("table")
    repo.write("app/pkg/machine.py", TABLE.format(extra="    (P.STOPPED, Ev.RESET): P.IDLE,\n"))
    repo.commit("reset")
    report = repo.check(base)
    # Phase is keyed in a transition table: a state Enum, so no data-model finding.
    assert kinds(report) == [("transition-added", "STOPPED --> IDLE")]
    [finding] = report.failures
    assert finding.line == 20
    assert "`Stopped --> Idle` on `RESET`" in finding.message
    assert "Stopped --> Idle : RESET" in finding.message

    # The diagram names both states but lacks the arrow: still blocked.
    repo.write(
        STATES, _states("  Idle --> Running : start\n  Running --> Stopped : stop\n  state Idle")
    )
    repo.commit("touch")
    assert kinds(repo.check(base)) == [("transition-added", "STOPPED --> IDLE")]
    repo.write(
        STATES, _states("  Idle --> Running\n  Running --> Stopped\n  Stopped --> Idle : reset")
    )
    repo.commit("fix")
    assert not repo.check(base).blocking

    # Removing the row requires the arrow to go.
    base = repo.head()
    repo.write("app/pkg/machine.py", TABLE.format(extra=""))
    repo.commit("no reset")
    assert kinds(repo.check(base)) == [("transition-removed", "STOPPED --> IDLE")]


def test_table_of_rows_built_by_calls(repo: Repo) -> None:
    source = TABLE.split("P = Phase", maxsplit=1)[0] + (
        "def t(name, src, ev, dst):\n    return (name, src, ev, dst)\n\n\n"
        "ROWS = [\n    t('go', Phase.IDLE, Ev.START, Phase.RUNNING),\n"
        "    t('halt', Phase.RUNNING, Ev.STOP, Phase.STOPPED),\n]\n"
    )
    report = repo.change({"app/pkg/rows.py": source, ARCH: mermaid_doc("flowchart LR\n  pkg.rows")})
    assert ("transition-added", "IDLE --> RUNNING") in kinds(report)
    assert ("state-added", "IDLE") in kinds(report)
    # Phase holds states; the event Enum is ordinary data.
    assert [f.name for f in report.failures if f.diagram == DATA] == ["Ev"]


def test_a_mapping_of_a_local_values_attributes_is_not_a_transition_table(repo: Repo) -> None:
    """``{found.base: found.base_tree, ...}``: attributes of a value, not Enum members.
    (It blocked a change of scaffold's own DiagramCheck code.)"""
    source = (
        "def unpack(found):\n"
        "    trees = {found.base: found.base_tree, found.head: found.head_tree}\n"
        "    return trees\n\n\n"
        "PAIRS = {found.base: found.base_tree, found.head: found.head_tree}\n"
    )
    report = repo.change(
        {"app/pkg/unpack.py": source, ARCH: mermaid_doc("flowchart LR\n  pkg.unpack")}
    )
    assert not [k for k in kinds(report) if k[0].startswith(("transition", "state"))]
    # A lower-case module in front of the Enum, and an alias, still make rows.
    rows = TABLE.split("P = Phase", maxsplit=1)[0] + (
        "import pkg.machine as states\n"
        "ROWS = {\n    states.Phase.IDLE: states.Phase.RUNNING,\n"
        "    states.Phase.RUNNING: states.Phase.STOPPED,\n}\n"
    )
    report = repo.change({"app/pkg/rows.py": rows, ARCH: mermaid_doc("flowchart LR\n  pkg.rows")})
    assert ("transition-added", "IDLE --> RUNNING") in kinds(report)


SM = """\
from statemachine import State, StateMachine


class TrafficLight(StateMachine):
    green = State(initial=True)
    yellow = State()
    red = State()
{extra}
    cycle = green.to(yellow) | yellow.to(red) | red.to(green)
"""


def test_python_statemachine_class(repo: Repo) -> None:
    report = repo.change(
        {"app/pkg/light.py": SM.format(extra=""), ARCH: mermaid_doc("flowchart LR\n  pkg.light")}
    )
    assert kinds(report) == [
        ("state-added", "green"),
        ("state-added", "red"),
        ("state-added", "yellow"),
        ("transition-added", "green --> yellow"),
        ("transition-added", "red --> green"),
        ("transition-added", "yellow --> red"),
    ]
    base = repo.git("rev-parse", "HEAD~1")
    repo.write(
        STATES,
        _states("  green --> yellow : cycle\n  yellow --> red : cycle\n  red --> green : cycle"),
    )
    repo.commit("diagram")
    assert not repo.check(base).blocking
    base = repo.head()
    repo.write("app/pkg/light.py", SM.format(extra="    blinking = State()\n"))
    repo.commit("blink")
    assert kinds(repo.check(base)) == [("state-added", "blinking")]


TRANSITIONS = """\
from transitions import Machine


class Matter:
    states = ["solid", "liquid", "gas"{extra}]

    def __init__(self) -> None:
        self.machine = Machine(
            model=self,
            states=Matter.states,
            transitions=[
                ["melt", "solid", "liquid"],
                {{"trigger": "evaporate", "source": "liquid", "dest": "gas"}},
            ],
            initial="solid",
        )
"""


def test_transitions_machine(repo: Repo) -> None:
    repo.write("app/pkg/matter.py", TRANSITIONS.format(extra=""))
    repo.write(ARCH, mermaid_doc("flowchart LR\n  pkg.matter"))
    repo.write(STATES, _states("  solid --> liquid : melt\n  liquid --> gas : evaporate"))
    base = repo.commit("matter")
    repo.write("app/pkg/matter.py", TRANSITIONS.format(extra=', "plasma"'))
    repo.commit("plasma")
    report = repo.check(base)
    assert kinds(report) == [("state-added", "plasma")]
    assert report.failures[0].message.startswith(f"{STATES} is not updated in this change")


def test_mermaid_state_source_outside_the_diagrams(repo: Repo) -> None:
    repo.write("docs/flows/order.mmd", "stateDiagram-v2\n  [*] --> Open\n  Open --> Closed\n")
    repo.write(STATES, _states("  [*] --> Open\n  Open --> Closed"))
    base = repo.commit("flow")
    repo.write(
        "docs/flows/order.mmd",
        "stateDiagram-v2\n  [*] --> Open\n  Open --> Review\n  Review --> Closed\n",
    )
    repo.commit("review step")
    report = repo.check(base)
    assert kinds(report) == [
        ("state-added", "Review"),
        ("transition-added", "Open --> Review"),
        ("transition-added", "Review --> Closed"),
        ("transition-removed", "Open --> Closed"),
    ]
    assert {f.source for f in report.failures} == {"docs/flows/order.mmd"}
    repo.write(STATES, _states("  [*] --> Open\n  Open --> Review\n  Review --> Closed"))
    repo.commit("diagram")
    assert not repo.check(base).blocking


def test_markdown_is_never_a_state_source(repo: Repo) -> None:
    # A Mermaid example in a README or a guide illustrates; it is no machine to follow.
    report = repo.change(
        {
            "README.md": "# x\n\n```mermaid\nstateDiagram-v2\n  [*] --> Draft\n```\n",
            "docs/guide.md": mermaid_doc("stateDiagram-v2\n  [*] --> Open\n  Open --> Done"),
            "docs/diagrams/01-flow.md": mermaid_doc("stateDiagram-v2\n  [*] --> Ignored"),
        }
    )
    assert kinds(report) == []
    assert not report.blocking
