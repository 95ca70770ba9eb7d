"""``scaffold demo``, and the scripted stand-in agent it runs instead of Claude Code.

run          run_demo: builds a small project and drives it end to end with three slots
scripted     a program that honours Claude Code's invocation contract with no model: it
             plays a script (edits, commands, signal-back calls) and prints stream-json
script       the script it plays: runs matched to invocations, and their actions
stream_json  what it prints: events shaped like Claude Code's
"""
