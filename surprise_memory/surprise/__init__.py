"""Stage 2, surprise: an embedding stream in, scores for every frame and gated events out.

* :mod:`.scorer`: :class:`~.scorer.SurpriseScorer`, the paper's Bayesian surprise s(t) and
  KL(t) of z_t under a sliding diagonal Gaussian of the W previous embeddings.
* :mod:`.gate`: :class:`~.gate.SurpriseGate`, the causal event gate (robust threshold
  tau = median + gamma * 1.4826 * MAD, local maxima, non-maximum suppression, bounded delay).
* :mod:`.robust`: the exact rolling median and MAD the gate's threshold uses.

Next stage: :mod:`surprise_memory.memory` turns each event into a stored episode.
"""
