"""Thin adapters to other ecosystems: verl's AgentLoop driving our Episodes, OpenEnv's
environment interface, ...

Each imports its package lazily and lives in its own module; their packages pin against ours,
so each has its own extra and is tested in its own venv (``make verl-venv``, ``make
venv-openenv``). Nothing else in longhorizon imports them.
"""
