"""Optimal system design (Seifried (2014) Ch. 7): parametric models, criteria, studies.

No ROS import at module level.
"""
