"""Serving the memory to other code: LLM agents and nodes on other machines.

* :mod:`.tool`: :class:`~.tool.EpisodicMemoryTool`, an OpenAI-style function tool in the
  shape DAAAM's agent tools take, over any episode retriever.
* :mod:`.ros_client`: :class:`~.ros_client.EpisodicMemoryClient`, the memory node's
  ``retrieve_episodes`` service from any rclpy node. The only module here that imports
  rclpy; importing this package does not import it.
"""
