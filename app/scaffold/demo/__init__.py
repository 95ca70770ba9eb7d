"""``scaffold demo`` (:mod:`~scaffold.demo.run`), and the scripted stand-in agent it runs
instead of Claude Code (:mod:`~scaffold.demo.scripted`)."""
