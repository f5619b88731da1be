"""The chat app: team chat with channels, threads, mentions, reactions and direct messages."""
