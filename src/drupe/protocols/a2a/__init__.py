"""A2A (Agent2Agent protocol 1.0, ``a2a-sdk``): agent cards and a JSON-RPC endpoint per agent."""
