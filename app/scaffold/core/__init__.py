"""The functional core: decisions as data, no I/O.

lifecycle    the task machine, declared as a table; ``decide(task, event) -> Decision``
states       names of states, stages and events;  effects  what a decision asks for
events       events, and the routing of agent signals to them
quest_flow   applying events to a whole quest: tasks, planning, questions, stops
planning     the planning phases (ChaosWhisperer, PathSeeker) as a table
review       rounds of the review loop: feedback kept, taken once, bounded
scheduler    which ready tasks get slots (dependencies, critical path, fair shares)
graph        graph algorithms;  safety  cost, time and failure limits
publication  when to publish state
"""
