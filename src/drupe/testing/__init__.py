"""Drupe's shipped test kit: the scripted model, fake provider servers, recording helpers.

Import the submodules directly (``drupe.agent.models.scripted``, ``drupe.testing.fake_providers``);
this package imports nothing, so importing one part never pulls in the web server of another.
"""

from __future__ import annotations
