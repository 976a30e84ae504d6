"""The end-to-end planner."""
