"""The ROS 2 nodes: thin adapters that convert messages and parameters and call the core.

These are the only modules of the package that import rclpy.
"""
