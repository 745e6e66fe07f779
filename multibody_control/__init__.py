"""multibody_control: trajectories, inversion (feedforward) and tracking control.

No ROS import at module level: the library works without ROS 2.
"""
