"""Thin adapters to other ecosystems' environment interfaces (OpenEnv, verifiers).

Each needs a package whose pins conflict with ours, so each has its own extra and is tested in
its own venv (``make venv-openenv``, ``make venv-verifiers``); nothing else imports them.
"""
