"""The GitHub App: what deliveries mean for quests, and the quest's side on GitHub.

service        one context per repository; ROUTES maps each event to its route
issue_routes   the trigger label, comments, commands, answers
pr_routes      approvals, closes, new heads, checks, statuses
runner         one quest run at a time per quest, poked by deliveries
forge          pull requests, reviews, merges, the status comment (the orchestrator's forge)
diagram_pr, feedback: the check run scaffold posts, the feedback it reads
client, auth, access, checkout, links, reconcile: the plumbing
"""
