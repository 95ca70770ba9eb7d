"""The agent process: how scaffold starts one, reads it and stops it.

claude         Claude Code's options for a role
process        run_agent: the agent's environment, its stream, the stuck timer, the stop
process_group  stopping a process group with deadlines, and watching it end
stream         the typed events, parse_line, and bytes framed into events and a summary
"""
