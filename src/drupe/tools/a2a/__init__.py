"""Remote A2A agents as tools of Drupe's agents (``[a2a.remotes.<id>]`` in ``config.toml``)."""
