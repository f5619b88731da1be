"""Dual-control tasks (as in τ²-bench): the agent cannot finish alone. A simulated person with
their own tools over the shared state (the `user` app) must act, and the agent has to ask and
guide them through ``user__send_message``."""
