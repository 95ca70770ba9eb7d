"""signal-back: how an agent reports to scaffold, over MCP Streamable HTTP on the run's socket.

records       Binding, and the signal-<seq>.json files: written durably, read back
tools         signal-back and the planning tools of one run (RunTools), as an MCP server
planning      what the planning tools share: problems, durable files, input schemas
requirements  write-requirements: ChaosWhisperer's requirements, and their reader
plan          create-tasks: PathSeeker's plan, created in the backlog once, and its reader
endpoint      SignalEndpoint: the run's tools served by the mcp SDK, behind a per-run secret
client        the agent's side: the mcp SDK's Streamable HTTP client
cli           scaffold signal-server: one binding's tools served by hand
"""
