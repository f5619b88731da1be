"""Task, criterion/grade, World, trajectory schema and the Policy interface: the lowest layer,
importing no other longhorizon package (the family registry lives in ``tasks/registry.py``)."""
