"""DiagramCheck's rules: what a diff requires of the diagrams, and whether they have it.

The functional core, one module per diagram kind (:mod:`.architecture`,
:mod:`.data_model`, :mod:`.states`, :mod:`.roadmap`) over what they share
(:mod:`.model`, :mod:`.classes`, :mod:`.members`, :mod:`.type_text`);
:mod:`.judge` combines them: its :func:`~.judge.requirements` reads the old and new text of the
changed files (a :class:`DiffInput`, built by the analyzer from git) and lists
:class:`Requirement` s: this diagram must name that, or must no longer name
it. Its :func:`~.judge.judge` holds them against the diagrams as they are at the head and
returns the :class:`~scaffold.diagramcheck.findings.Finding` s that are not
met. Neither touches git or the disk.

Which diagram: new, moved or deleted modules -> ``architecture``; data classes
(dataclasses, pydantic models, attrs classes, TypedDicts, NamedTuples,
SQLAlchemy models, Enums) -> ``data_model``; states (Enums named ``*State`` /
``*Status`` or keyed in a transition table, python-statemachine and
``transitions`` machines, ``stateDiagram`` sources outside the diagrams) ->
``states``; Backlog.md milestones -> ``roadmap``.
"""
