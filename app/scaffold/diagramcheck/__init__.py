"""DiagramCheck: a change whose diagrams lag the code is blocked.

:func:`~scaffold.diagramcheck.analyzer.analyze` reads the real diff between two commits
(from their merge base, like a pull request; :mod:`.git_diff`), reads the old and new
Python of every changed file with :mod:`ast` (:mod:`.python_reader`), and asks the
:mod:`.rules` whether the configured Mermaid diagrams (:mod:`.mermaid`) changed in the
same diff and name what was added (and no longer name what was removed). :mod:`.render`
turns the :class:`~scaffold.diagramcheck.findings.Report` into text, JSON, GitHub
workflow commands, Markdown or check-run annotations; :mod:`.generate` drafts the
diagrams from the code.
"""
