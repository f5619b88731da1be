"""Adapters that let other training engines drive our Episodes (verl's AgentLoop, ...).

Each imports its engine lazily and lives in its own module, so the core never needs them."""
