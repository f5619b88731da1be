"""The `user` app: the simulated person of a dual-control task (as in τ²-bench) and the systems
over their account. The agent talks to them with ``user__send_message``; they act with their own
tools over the shared state (logged in ``actions``, actor ``user``), which the agent cannot touch.
Domains: ``mobile`` (a carrier's customer and their phone), ``identity`` (an employee locked out
of their account), ``onboarding`` (a new hire before day one)."""
