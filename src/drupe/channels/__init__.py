"""IM channels: Telegram, Slack and a signed webhook feeding Drupe's one pipeline.

Inbound platform events become dispatch requests (``drupe.admission.dispatch.Dispatcher``);
answers flow back through ``drupe.channels.delivery_listener.ChannelListener`` and the
``ChannelSink`` port each adapter implements. See ``docs/lifecycles/channels.md``.
"""
