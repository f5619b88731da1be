"""Log analysis families: answer questions from raw service logs with a real shell."""
