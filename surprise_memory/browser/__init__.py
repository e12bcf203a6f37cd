"""The memory browser: one web page over an episode store (``surprise-memory serve``).

A person opens it next to a robot (or on a fleet's server) to see what was remembered: a
timeline of the recording with the stored episodes (and the surprise curve with its
threshold where ``process`` kept the per-frame scores), search by text, image, time and
place with the same retrieval as the CLI and the service, a map of the episodes' poses
per robot, each episode's frames (strip and playback) with why it was kept, and the
episodes a running memory node adds, as they come. The store is opened read-only; the
page is plain HTML, CSS and JavaScript shipped in ``static/`` (no request leaves the
server, so it works on a robot without internet).

* :mod:`~surprise_memory.browser.app`: the web application (Starlette) and its routes;
* :mod:`~surprise_memory.browser.views`: what the routes answer, as plain data (the
  search fields -> a query);
* :mod:`~surprise_memory.browser.live`: the live feed (server-sent events of episodes
  added and evicted);
* :mod:`~surprise_memory.browser.run_notes`: the curve and the "why kept" notes from what
  ``process`` wrote;
* :mod:`~surprise_memory.browser.sign_in`: with a token, the sign-in form and its session
  cookie (the rule itself: :mod:`surprise_memory.access`).

Starlette and uvicorn are the optional ``browser`` extra (``requirements/browser.txt``);
only :mod:`~surprise_memory.browser.app` and :mod:`~surprise_memory.browser.sign_in`
import them.
"""
