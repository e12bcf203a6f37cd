"""Serving the memory to other code: LLM agents and nodes on other machines.

* :mod:`.tool`: :class:`~.tool.EpisodicMemoryTool`, a drop-in tool for DAAAM's agent
  (flat strict OpenAI signature, nested form too), over any episode retriever.
* :mod:`.ros_client`: :class:`~.ros_client.EpisodicMemoryClient`, the memory node's
  ``retrieve_episodes`` service from any rclpy node, and
  :class:`~.ros_client.RosEpisodeRetriever`, the same service as a retriever for the
  tool. The only module here that imports rclpy; importing this package does not.
"""
