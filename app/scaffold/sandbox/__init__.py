"""The trust boundary around agents and Ward: bubblewrap namespaces, built per process.

- :mod:`~scaffold.sandbox.settings`: which sandbox is in force (``sandbox.mode``).
- :mod:`~scaffold.sandbox.mounts`: what a process sees, as data, and bwrap's mount options.
- :mod:`~scaffold.sandbox.confinement`: one process's view (worktree, private HOME, git
  metadata) and its command line.
- :mod:`~scaffold.sandbox.egress`: the only network routes out (model API, allowed hosts).
- :mod:`~scaffold.sandbox.bridge`: the program inside that listens for those routes.
"""
