"""Agent CLIs behind one port: the backends (:mod:`.claude`, :mod:`.codex`, :mod:`.gemini`,
chosen per role by :mod:`.choice`, priced by :mod:`.prices`), running one (:mod:`.process`,
:mod:`.process_group`) and reading its output (:mod:`.stream`)."""
