"""The agent process: how scaffold starts one, reads it and stops it.

claude    Claude Code's options for a role
process   run_agent: the process group, its stream, the stuck timer, the stop
stream    stream-json lines parsed into typed events
"""
