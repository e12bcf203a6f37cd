"""The ROS 2 nodes: thin adapters that convert messages and parameters and call the core.

One node a file: :mod:`.encoder_node` (perception), :mod:`.scorer_node` (surprise),
:mod:`.memory_node` (memory and retrieval), and :mod:`.pipeline_node`, the three in one
process (one camera subscription, frames and results handed over in memory). The work
each node does is a part the node hosts, so that ``pipeline_node`` runs the same code:
:mod:`.encoder_part`, :mod:`.scorer_part`, :mod:`.memory_part`. What they share, one job a
file:

* :mod:`.qos`: the QoS profiles of every topic, and the camera subscription;
* :mod:`.messages`: stamps, poses, images and stored records (their kind and place
  status) between messages and core types;
* :mod:`.parameters`: parameters declared from the config schema, and their validation;
* :mod:`.diagnostics`: the counters published on ``/diagnostics``;
* :mod:`.lifecycle`: the managed-node base (configure, activate, ... and live settings);
* :mod:`.runtime`: ``main()`` with a clean shutdown, the stamp-order watch, camera frames in;
* :mod:`.service_caller`: a service called from a private node (the agents' clients).

These modules and :mod:`surprise_memory.agents.ros_client` are the only ones that import
rclpy.
"""
