"""Reporting families: gather data from several apps and report it by mail."""
