"""Stage 2, surprise: an embedding stream in, scores for every frame and gated events out.

* :mod:`.scorer`: :class:`~.scorer.SurpriseScorer`, the paper's Bayesian surprise s(t) and
  KL(t) of z_t under a sliding diagonal Gaussian of the W previous embeddings.
* :mod:`.gate`: :class:`~.gate.SurpriseGate`, the causal event gate (robust threshold
  tau = median + gamma * 1.4826 * MAD, local maxima, non-maximum suppression, bounded delay).
* :mod:`.robust`: the exact rolling median and MAD the gate's threshold uses.

Beyond the paper (each off by default, so the paper's method stays exact):

* :mod:`.trigger_filter`: :class:`~.trigger_filter.TriggerFilter`, what the gate's
  candidates pass through before they become events: :mod:`.habituation` (candidates that
  resemble recently kept events are suppressed) and :mod:`.budget` (an episodes-per-minute
  cap that keeps the most surprising), each decision a :class:`~.decisions.Decision`;
* :mod:`.baseline`: :class:`~.baseline.BaselineGate`, the paper's uniform and random
  baselines at equal budget, in the gate's place.

Next stage: :mod:`surprise_memory.memory` turns each event into a stored episode.
"""
