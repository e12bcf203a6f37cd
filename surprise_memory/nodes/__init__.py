"""The ROS 2 nodes: thin adapters that convert messages and parameters and call the core.

One node a file: :mod:`.encoder_node` (perception), :mod:`.scorer_node` (surprise),
:mod:`.memory_node` (memory and retrieval). What they share, one job a file:

* :mod:`.qos`: the QoS profiles of every topic, and the camera subscription;
* :mod:`.messages`: stamps, poses and images between messages and core types;
* :mod:`.parameters`: parameters declared from the config schema, and their validation;
* :mod:`.diagnostics`: the counters published on ``/diagnostics``;
* :mod:`.runtime`: ``main()`` with a clean shutdown, the stamp-order watch, camera frames in.

These modules and :mod:`surprise_memory.agents.ros_client` are the only ones that import
rclpy.
"""
