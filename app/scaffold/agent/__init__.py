"""The agent process: how scaffold starts one, reads it and stops it.

claude         Claude Code's options for a role
process        run_agent: the agent's environment, its stream, the stuck timer, the stop
process_group  stopping a process group with deadlines, and watching it end
stream         stream-json bytes framed into lines, events and a summary
stream_events  what one line is: the typed events and parse_line
"""
