"""The imperative shell: runs a quest, carrying out the core's effects.

orchestrator  the main loop: one writer of the quest, the scheduling tick, jobs' events
agent_jobs    an agent run started (its slot, channel and sandbox), waited for, and its end
agent_runs    one agent run's invocation and what its outcome says (pure; also the Action's)
effect_jobs   every other effect: worktrees, Ward, DiagramCheck, pull requests, Backlog.md
recovery      a quest taken up again after scaffold stopped
inbox         a person's answers, approvals, aborts and feedback, and how they are applied
repo_ops      the repository-side effects, blocking, each returning its event
forge         where pull requests live (LocalForge; the App's is scaffold.github.forge)
session       the repository and quest chosen, and run (the CLI's entry)
"""
