"""The GitHub App: what deliveries mean for quests, and the quest's side on GitHub.

service        one context per repository; ROUTES maps each event to its route
issue_routes   the trigger label, comments, answers;  commands  ``/scaffold`` commands
pr_routes      approvals, closes, new heads, checks;  review_routes  the review loop's
runner         one quest run at a time per quest, poked by deliveries
forge          pull requests, reviews, merges (the orchestrator's forge on GitHub)
status_comment, diagram_pr, own_checks, feedback, round_answers: what scaffold posts
client, auth, access, trust, checkout, links, state_sync, reconcile: the plumbing
"""
