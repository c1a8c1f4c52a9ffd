"""What a watch verdict says wherever it is shown: what server-side TTFT leaves out, and the words for a
figure the server does not expose.
"""

from __future__ import annotations

SERVER_TTFT_LABEL = ("server-side TTFT: from arrival at the server; excludes network, TLS, proxies and "
                     "client queueing")
COMPLETION_NOTE = ("completion is not observable from TTFT histograms: a request that got its first token in "
                   "time and failed later counts as good here")
NO_TTFT_NOTE = "no TTFT histogram: use --probe-rate"
NOT_EXPOSED = "not exposed by this server"
