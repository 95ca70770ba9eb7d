"""The ``scaffold`` command: the click CLI, its verbs, and the page sync of scaffold's own diagrams."""
