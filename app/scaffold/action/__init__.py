"""scaffold as a GitHub Action: DiagramCheck on a pull request, one agent slot on a runner.

:mod:`~scaffold.action.env` reads what the runner provides (the event payload,
the workspace, the files outputs and the job summary go to);
:mod:`~scaffold.action.outputs` writes step outputs and the job summary;
:mod:`~scaffold.action.diagram_check` picks the commits of the event and runs
DiagramCheck; :mod:`~scaffold.action.slot` runs one agent for one task on its
``scaffold/task-<n>`` branch and pushes what it did. ``action.yml`` at the
repository root wires them to ``scaffold action <mode>``.
"""
